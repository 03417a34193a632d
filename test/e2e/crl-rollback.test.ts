// A restart must not undo revocations: the highest CRL number installed is kept with the state, and a
// real process start on an older CRL (or on one without a number) stops with a clear message, changing
// nothing. Putting the newer CRL back lets it start.
import t from 'tap'
import { JournaledFileStore } from '../../src/state/journaled-file-store.js'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { revoke } from '../../pki/revocation.js'
import { craftCrl } from '../identity/crl-craft.js'
import { bundle, checkinBody, makePki, request, writeTestConfig } from './harness.js'
import { runController, spawnController } from './process.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const nodeA = await bundle(pki, 'rack1-a', 'node')
const nodeB = await bundle(pki, 'rack1-b', 'node')
const configPath = writeTestConfig(pki, root, { total_shards: 32 })
const crlPath = join(pki.dir, 'crl.pem')
const stateDir = join(root, 'state')
const statePath = join(stateDir, 'state.json')
const auditPath = join(root, 'audit.log')
const olderCrl = readFileSync(crlPath) // CRL number 1, from init

const served = (port: number, who: typeof nodeA) => request(port, pki.ca, who, '/v1/keys').then((r) => r.status === 200, () => false)

/** Polls `check` for up to `ms`; true once it held. */
async function eventually(ms: number, check: () => Promise<boolean>): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) if (await check()) return true
  return false
}

// A real controller installs a revocation (CRL 2) and stops cleanly.
const first = await spawnController(['--config', configPath], root)
const joined = await request(first.port, pki.ca, nodeA, '/v1/checkin', { body: checkinBody('rack1-a') })
if (joined.status !== 200) throw new Error(`setup check-in failed: ${joined.text}`)
const { crlNumber } = await revoke(pki.dir, { name: 'rack1-a' })
const revokedInTime = await eventually(2000, async () => !(await served(first.port, nodeA)))
first.child.kill('SIGTERM')
await first.exited
const newerCrl = readFileSync(crlPath)

t.test('the running controller enforced CRL 2 and recorded its number with the state', async (t) => {
  t.equal(crlNumber, 2)
  t.ok(revokedInTime, 'rack1-a refused within 2 s of pxe-pki revoke')
  const state = await new JournaledFileStore(stateDir).load()
  t.equal(state?.meta.crlNumber, '2', 'the state holds the CRL number, in decimal')
})

const refusals: [string, Buffer, RegExp][] = [
  ['the older crl.pem put back', olderCrl, /key "tls\.crl": \S*crl\.pem is CRL number 1, older than CRL number 2 that was in force before this restart/],
  [
    'a CRL without a CRL number',
    Buffer.from(craftCrl({
      caCertPem: pki.ca,
      caKeyPem: readFileSync(join(pki.dir, 'ca-key.pem'), 'utf8'),
      thisUpdate: new Date(Date.now() - 60_000),
      nextUpdate: new Date(Date.now() + 86_400_000),
      extensions: [],
    })),
    /key "tls\.crl": \S*crl\.pem has no CRL number, but CRL number 2 was in force before this restart/,
  ],
]

for (const [label, crl, message] of refusals) {
  t.test(`${label}: the start stops with a clear message and changes nothing`, async (t) => {
    writeFileSync(crlPath, crl)
    const stateBefore = readFileSync(statePath)
    const filesBefore = readdirSync(stateDir).sort()
    const auditBefore = readFileSync(auditPath)
    const run = await runController(['--config', configPath], root)
    t.comment(run.stderr.trim())
    t.not(run.code, 0, 'non-zero exit')
    t.match(run.stderr, message, 'names the file and both numbers')
    t.match(run.stderr, /undo .*revocations/, 'says why')
    t.match(run.stderr, /pxe-pki crl.*start again/, 'says what to do')
    t.notMatch(run.stderr, /\n\s+at /, 'no stack trace')
    t.same(readFileSync(statePath), stateBefore, 'the state file is byte-identical')
    t.same(readdirSync(stateDir).sort(), filesBefore, 'nothing new in the state directory')
    t.same(readFileSync(auditPath), auditBefore, 'nothing audited: the start stopped before the log was opened')
  })
}

t.test('with the newer CRL back, the controller starts and the revocation holds', async (t) => {
  writeFileSync(crlPath, newerCrl)
  const again = await spawnController(['--config', configPath], root)
  t.teardown(() => void again.child.kill('SIGKILL'))
  t.notOk(await served(again.port, nodeA), 'rack1-a stays revoked')
  t.ok(await served(again.port, nodeB), 'rack1-b is served')
})
