// A damaged state file stops a real process start with a clear message and is left exactly as it was.
import t from 'tap'
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { bundle, checkinBody, makePki, request, writeTestConfig } from './harness.js'
import { runController, spawnController } from './process.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'rack1-a', 'node')
const configPath = writeTestConfig(pki, root, { total_shards: 32 })
const stateDir = join(root, 'state')
const statePath = join(stateDir, 'state.json')
const prevPath = `${statePath}.prev`
const auditPath = join(root, 'audit.log')

// A real state file (and its .prev) written by a real controller: two plan changes, then a clean stop.
const first = await spawnController(['--config', configPath], root)
const joined = await request(first.port, pki.ca, node, '/v1/checkin', { body: checkinBody('rack1-a', { capacity: 16 }) })
if (joined.status !== 200) throw new Error(`setup check-in failed: ${joined.text}`)
const grown = await request(first.port, pki.ca, node, '/v1/checkin', { body: checkinBody('rack1-a', { capacity: 32 }) })
if (grown.status !== 200) throw new Error(`setup check-in failed: ${grown.text}`)
first.child.kill('SIGTERM')
await first.exited
const good = readFileSync(statePath)
const prev = readFileSync(prevPath)

const flipped = Buffer.from(good)
flipped[Math.floor(flipped.length / 2)]! ^= 0x01
const variants: Array<[string, Buffer]> = [
  ['truncated to half', good.subarray(0, Math.floor(good.length / 2))],
  ['truncated to nothing', Buffer.alloc(0)],
  ['one flipped byte', flipped],
  ['not JSON at all', Buffer.from('\u0000\u0001garbage')],
]

for (const [label, damaged] of variants) {
  t.test(`state file ${label}: the start stops, the file is untouched`, async (t) => {
    writeFileSync(statePath, damaged)
    const filesBefore = readdirSync(stateDir).sort()
    const auditBefore = readFileSync(auditPath)
    const run = await runController(['--config', configPath], root)
    t.comment(run.stderr.trim())
    t.not(run.code, 0, 'non-zero exit')
    t.match(run.stderr, /^pxe-controller: state file .*state\.json is unusable: .+\. It was left exactly as it is\./m, 'the message names the file and says it was left alone')
    t.match(run.stderr, /previous good copy is at .*state\.json\.prev/, 'the message points at the previous good copy')
    t.notMatch(run.stderr, /\n\s+at /, 'no stack trace')
    t.same(readFileSync(statePath), damaged, 'the damaged file is byte-identical')
    t.same(readFileSync(prevPath), prev, 'the previous good copy is untouched')
    t.same(filesBefore, ['state.journal', 'state.json', 'state.json.prev', 'tls-ticket-keys.json'], 'the snapshot, its previous copy, the journal and the ticket keys')
    t.same(readdirSync(stateDir).sort(), filesBefore, 'nothing new in the state directory')
    t.same(readFileSync(auditPath), auditBefore, 'nothing was audited: the start stopped before the log was opened')
  })
}

t.test('state file deleted while its previous copy is there: the start stops instead of starting over', async (t) => {
  rmSync(statePath)
  const filesBefore = readdirSync(stateDir).sort()
  const run = await runController(['--config', configPath], root)
  t.not(run.code, 0, 'non-zero exit')
  t.match(run.stderr, /state file .*state\.json is unusable: it is missing, but its previous copy exists/)
  t.same(readdirSync(stateDir).sort(), filesBefore, 'no fresh state at generation 0')
  t.same(readFileSync(prevPath), prev, 'the previous good copy is untouched')
})

t.test('with the good file restored by hand, the controller starts on the saved generation', async (t) => {
  writeFileSync(statePath, good)
  const again = await spawnController(['--config', configPath], root)
  t.teardown(() => void again.child.kill('SIGKILL'))
  const res = await request(again.port, pki.ca, node, '/v1/checkin', { body: checkinBody('rack1-a', { capacity: 32 }) })
  t.equal(res.status, 200)
  t.equal(res.json.generation, grown.json.generation, 'same generation as before the damage')
  t.equal(res.json.range_count, grown.json.range_count, 'same range')
})
