// TLS sessions survive a controller restart (ticket keys kept in state_dir), die with every CRL change,
// and a resumed session is still checked against the revocation set and validity on every request.
import t from 'tap'
import { generateKeyPairSync } from 'node:crypto'
import { readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import tls from 'node:tls'
import { loadCa } from '../../pki/ca.js'
import { buildCertificate, clientExtensions } from '../../pki/cert-builder.js'
import { newSerial } from '../../pki/serial.js'
import { revoke } from '../../pki/revocation.js'
import { issueBundle } from '../../pki/bundle-issue.js'
import { parseCrl } from '../../src/identity/crl.js'
import { crlFingerprint, TICKET_KEY_FILE } from '../../src/server/ticket-key-file.js'
import { decodeStateFile, encodeStateFile } from '../../src/state/state-file-format.js'
import { checkinBody, makePki, startTestController, type Identity, type TestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)

/** A P-256 node bundle (the fleet's key type; quick to make). */
async function ecNode(name: string): Promise<Identity> {
  const { bundleDir } = await issueBundle(pki.dir, name, 'node', { keyType: 'ec' })
  return { cert: readFileSync(join(bundleDir, 'cert.pem'), 'utf8'), key: readFileSync(join(bundleDir, 'key.pem'), 'utf8') }
}

const nodeA = await ecNode('node-a')
const nodeB = await ecNode('node-b')
const keyFile = join(root, 'state', TICKET_KEY_FILE)

interface Visit {
  readonly status: number
  readonly reused: boolean
  /** The newest session the server gave on this connection (what a node keeps for the next one). */
  readonly session: Buffer | undefined
}

/** One connection: a handshake (resuming `session` if given), one check-in, then close. */
function checkIn(port: number, id: Identity, nodeId: string, session?: Buffer): Promise<Visit> {
  const body = JSON.stringify(checkinBody(nodeId))
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca: pki.ca, cert: id.cert, key: id.key, ...(session ? { session } : {}) })
    let reused = false
    let latest: Buffer | undefined
    let text = ''
    socket.on('session', (s: Buffer) => (latest = s))
    socket.once('secureConnect', () => {
      reused = socket.isSessionReused()
      socket.write(`POST /v1/checkin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`)
    })
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')))
    socket.once('error', reject)
    socket.once('close', () => {
      const status = /^HTTP\/1\.1 (\d{3}) /.exec(text)
      if (status === null) reject(new Error(`no HTTP answer (${JSON.stringify(text.slice(0, 80))})`))
      else resolve({ status: Number(status[1]), reused, session: latest })
    })
  })
}

/** Waits (bounded) until the controller refuses a full handshake of `id`: the new CRL is in force. */
async function untilRefused(port: number, id: Identity, nodeId: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await checkIn(port, id, nodeId).then(() => false, () => true)) return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`${nodeId} was still served 10 s after the revocation`)
}

/** Waits (bounded) for an `unauthenticated` audit line with `reason`: why the request got 401. */
async function auditedRefusal(reason: string): Promise<boolean> {
  for (let i = 0; i < 50; i++) {
    const lines = readFileSync(join(root, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event?: string; reason?: string })
    if (lines.some((l) => l.event === 'unauthenticated' && l.reason === reason)) return true
    await new Promise((r) => setTimeout(r, 50))
  }
  return false
}

async function restart(ctl: TestController): Promise<TestController> {
  await ctl.running.stop()
  return startTestController(pki, root)
}

t.test('a session made before a restart resumes after it, and its check-in is served', async (t) => {
  let ctl = await startTestController(pki, root)
  const first = await checkIn(ctl.port, nodeA, 'node-a')
  t.equal(first.status, 200)
  t.equal(first.reused, false, 'the first connection is a full handshake')
  t.ok(first.session, 'the controller issued a session ticket')
  t.equal(statSync(keyFile).mode & 0o777, 0o600, 'the ticket keys are saved 0600')
  t.equal(statSync(join(root, 'state')).mode & 0o777, 0o700, 'in the 0700 state folder')
  ctl = await restart(ctl)
  t.teardown(() => ctl.running.stop())
  const after = await checkIn(ctl.port, nodeA, 'node-a', first.session)
  t.equal(after.reused, true, 'resumed across the restart: no full handshake')
  t.equal(after.status, 200, 'and served')
  // OpenSSL sends no new ticket on a resumed connection: a node keeps offering the one it has.
  const again = await checkIn(ctl.port, nodeA, 'node-a', after.session ?? first.session)
  t.equal(again.reused, true, 'and resumes again')
  const fresh = await checkIn(ctl.port, nodeA, 'node-a')
  t.equal((await checkIn(ctl.port, nodeA, 'node-a', fresh.session)).reused, true, 'a session the restarted controller gave resumes too')
})

t.test('a session made before a CRL change does not resume, neither before nor after a restart; one made after it does', async (t) => {
  let ctl = await startTestController(pki, root)
  t.teardown(() => ctl.running.stop())
  const before = await checkIn(ctl.port, nodeA, 'node-a')
  t.equal((await checkIn(ctl.port, nodeA, 'node-a', before.session)).reused, true, 'sessions resume while nothing changes')
  const other = await ecNode('node-x')
  await revoke(pki.dir, { name: 'node-x' })
  await untilRefused(ctl.port, other, 'node-x')
  const changed = await checkIn(ctl.port, nodeA, 'node-a', before.session)
  t.equal(changed.reused, false, 'the CRL change made the old session unusable (full handshake)')
  t.equal(changed.status, 200, 'node-a itself is not revoked: served after a full handshake')
  ctl = await restart(ctl)
  const old = await checkIn(ctl.port, nodeA, 'node-a', before.session)
  t.equal(old.reused, false, 'after a restart the pre-change session still does not resume')
  t.equal((await checkIn(ctl.port, nodeA, 'node-a', changed.session)).reused, true, 'the keys drawn at the CRL change were saved: a later session resumes after the restart')
})

t.test('a CRL changed while the controller was down: saved keys are not used', async (t) => {
  let ctl = await startTestController(pki, root)
  const before = await checkIn(ctl.port, nodeA, 'node-a')
  await ctl.running.stop()
  await ecNode('node-y')
  await revoke(pki.dir, { name: 'node-y' })
  ctl = await startTestController(pki, root)
  t.teardown(() => ctl.running.stop())
  t.equal((await checkIn(ctl.port, nodeA, 'node-a', before.session)).reused, false, 'new keys for the new CRL: full handshake')
})

t.test('a resumed session whose certificate was revoked meanwhile gets 401 on its request', async (t) => {
  // The keys die with each CRL change; here they are made to survive one (as a bug or a copied key file
  // would), to show that the per-request check holds on its own.
  let ctl = await startTestController(pki, root)
  const before = await checkIn(ctl.port, nodeB, 'node-b')
  t.equal(before.status, 200)
  await ctl.running.stop()
  await revoke(pki.dir, { name: 'node-b' })
  const decoded = decodeStateFile(readFileSync(keyFile))
  if ('problem' in decoded) throw new Error(decoded.problem)
  const rebound = { ...(decoded.body as Record<string, unknown>), crl_sha256: crlFingerprint(parseCrl(readFileSync(join(pki.dir, 'crl.pem'), 'utf8')).pem) }
  writeFileSync(keyFile, encodeStateFile(rebound), { mode: 0o600 })
  ctl = await startTestController(pki, root)
  t.teardown(() => ctl.running.stop())
  const resumed = await checkIn(ctl.port, nodeB, 'node-b', before.session)
  t.equal(resumed.reused, true, 'precondition: the session resumed (OpenSSL did not look at the CRL)')
  t.equal(resumed.status, 401, 'the request is refused')
  t.ok(await auditedRefusal('the certificate is revoked'), 'because the certificate is revoked (audited)')
  t.equal(await checkIn(ctl.port, nodeB, 'node-b').then(() => 'served', () => 'refused'), 'refused', 'a full handshake is refused by OpenSSL')
})

t.test('a resumed session whose certificate has expired meanwhile gets 401 on its request', async (t) => {
  const ca = await loadCa(pki.dir)
  const keys = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const notBefore = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000)
  const notAfter = new Date(Math.floor(Date.now() / 1000) * 1000 + 3_000)
  const cert = await buildCertificate({
    serial: newSerial(),
    subject: [{ shortName: 'CN', value: 'node-short' }, { shortName: 'OU', value: 'node' }],
    spkiDer: keys.publicKey.export({ type: 'spki', format: 'der' }),
    notBefore,
    notAfter,
    extensions: clientExtensions('ec'),
  }, ca)
  const short: Identity = { cert, key: keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() }
  const ctl = await startTestController(pki, root)
  t.teardown(() => ctl.running.stop())
  const before = await checkIn(ctl.port, short, 'node-short')
  t.equal(before.status, 200, 'served while valid')
  await new Promise((r) => setTimeout(r, Math.max(0, notAfter.getTime() - Date.now()) + 1_100))
  const resumed = await checkIn(ctl.port, short, 'node-short', before.session)
  t.equal(resumed.reused, true, 'precondition: the session resumed (OpenSSL did not look at the validity)')
  t.equal(resumed.status, 401, 'the request is refused')
  t.ok(await auditedRefusal('the certificate is outside its validity period'), 'because the certificate has expired (audited)')
})
