// pxe-ctl's client: the controllers of the context in order, moving on after a closed port or a 503
// not_leader (a tiny HTTPS server with a certificate of the same CA plays the HA follower); a bundle
// of another CA fails with a clear TLS error; a node bundle gets the controller's 403; crl push checks
// its file before sending and sends it as application/pkix-crl.
import t from 'tap'
import https from 'node:https'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { issueBundle } from '../../pki/issue-certs.js'
import { makePki } from '../e2e/harness.js'
import { runCtl, spawnCtl, startFleet, writeContext } from './support.js'

const fleet = await startFleet(t)
const { root, pki, url, operatorBundle, home } = fleet
await fleet.checkIn('a', { capacity: 16 })
await fleet.checkIn('b', { capacity: 64 }) // b can take a's shards: a's drain leaves none without a node

interface Seen {
  method: string
  url: string
  contentType: string | undefined
  body: string
  cn: string
}

/** An HTTPS server with the PKI's server certificate that requires a client certificate of the CA and answers `status` and `body`. */
async function fakeController(status: number, body: unknown): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = []
  const server = https.createServer(
    { cert: readFileSync(join(pki.dir, 'server.pem')), key: readFileSync(join(pki.dir, 'server-key.pem')), ca: pki.ca, requestCert: true, rejectUnauthorized: true },
    (req, res) => {
      let data = ''
      req.setEncoding('utf8').on('data', (d: string) => (data += d))
      req.on('end', () => {
        const peer = (req.socket as import('node:tls').TLSSocket).getPeerCertificate()
        seen.push({ method: req.method!, url: req.url!, contentType: req.headers['content-type'], body: data, cn: String(peer.subject?.CN ?? '') })
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
      })
    },
  )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, seen }
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

function context(name: string, controllers: string[], bundleDir = operatorBundle): string {
  const path = join(root, `${name}.json`)
  writeContext(path, controllers, bundleDir)
  return path
}

t.test('a closed port first, then the controller: the answer, and -v says which controller answered', async (t) => {
  const down = `https://127.0.0.1:${await closedPort()}`
  const res = await runCtl(['--context', context('down-first', [down, url]), 'status', '-v'], { home })
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, `controller        ${url}`)
  t.match(res.stderr, `GET /v1/plan → ${down}: connection refused; trying the next controller`)
  t.match(res.stderr, `GET /v1/plan → ${url}: 200`)
  const quiet = await runCtl(['--context', context('down-first', [down, url]), 'nodes'], { home })
  t.equal(quiet.code, 0)
  t.equal(quiet.stderr, '', 'without -v a skipped controller is not reported')
})

t.test('a controller that accepts the connection but never answers: the next one after --request-timeout', async (t) => {
  const sockets = new Set<net.Socket>()
  const silent = net.createServer((socket) => void sockets.add(socket)) // accepts, never speaks TLS
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => (sockets.forEach((s) => s.destroy()), silent.close(() => resolve()))))
  const hung = `https://127.0.0.1:${(silent.address() as AddressInfo).port}`
  const res = await runCtl(['--context', context('hung-first', [hung, url]), 'status', '-v', '--request-timeout', '0.5'], { home })
  t.equal(res.code, 0, res.stderr)
  t.match(res.stderr, `GET /v1/plan → ${hung}: no answer within 0.5 s; trying the next controller`)
  t.match(res.stdout, `controller        ${url}`)
})

t.test('Ctrl-C ends a watch whose request a silent controller holds, at once and cleanly', async (t) => {
  const sockets = new Set<net.Socket>()
  const silent = net.createServer((socket) => void sockets.add(socket))
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => (sockets.forEach((s) => s.destroy()), silent.close(() => resolve()))))
  const hung = `https://127.0.0.1:${(silent.address() as AddressInfo).port}`
  const run = spawnCtl(['--context', context('hung-only', [hung]), 'watch', '--request-timeout', '60'], { home })
  // the first request is held: its connection is open (on a loaded box the process may take a while to get there)
  for (let i = 0; i < 300 && sockets.size === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50))
  await new Promise((resolve) => setTimeout(resolve, 300))
  const sentAt = performance.now()
  run.child.kill('SIGINT')
  const res = await run.done
  t.ok(performance.now() - sentAt < 3000, `ended ${Math.round(performance.now() - sentAt)} ms after SIGINT, not after the 60 s request timeout`)
  t.equal(res.code, 0, res.stderr)
  t.equal(res.stderr, '', 'no error for the request the Ctrl-C cut')
})

t.test('a controller deferring connections (a reconnect storm) is named as such', async (t) => {
  const busy = net.createServer((socket) => {
    socket.on('data', () => undefined)
    socket.end('PXE-BUSY retry_after_ms=1500\r\n')
  })
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => busy.close(() => resolve())))
  const deferring = `https://127.0.0.1:${(busy.address() as AddressInfo).port}`
  const res = await runCtl(['--context', context('busy-only', [deferring]), 'status'], { home })
  t.equal(res.code, 1)
  t.match(res.stderr, /deferred this connection: it is busy with a reconnect storm .*retry in a few seconds/)
})

t.test('an HA follower answering 503 not_leader is skipped for the next controller', async (t) => {
  const follower = await fakeController(503, { error: 'not_leader', message: 'this controller is not the leader; the leader is test-controller' })
  const res = await runCtl(['--context', context('follower-first', [follower.url, url]), 'drain', 'a', '-v'], { home })
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, 'a is draining')
  t.match(res.stderr, `→ ${follower.url}: 503 not_leader: this controller is not the leader; the leader is test-controller; trying the next controller`)
  t.equal(follower.seen[0]?.cn, 'alice', 'the follower saw the operator certificate')
  const undrain = await runCtl(['--context', context('follower-first', [follower.url, url]), 'undrain', 'a'], { home })
  t.equal(undrain.code, 0, undrain.stderr)

  const alone = await runCtl(['--context', context('follower-only', [follower.url]), 'status'], { home })
  t.equal(alone.code, 1, 'no leader among the controllers: exit 1')
  t.match(alone.stderr, `pxe-ctl: error: no controller answered GET /v1/plan:\n  ${follower.url}: 503 not_leader: this controller is not the leader; the leader is test-controller`)
})

t.test('refusals: another CA, a node bundle, a controller error; each exit 1 with a clear message', async (t) => {
  const other = await makePki(join(root, 'other'))
  const { bundleDir: foreign } = await issueBundle(other.dir, 'mallory', 'operator', { outDir: join(root, 'other-bundles') })
  const tls = await runCtl(['--context', context('foreign', [url], foreign), 'status'], { home })
  t.equal(tls.code, 1)
  t.match(tls.stderr, /TLS: the controller's certificate is not signed by the bundle's ca\.pem \([A-Z_]+\)/)

  const { bundleDir: nodeBundle } = await issueBundle(pki.dir, 'node-z', 'node', { outDir: join(root, 'node-bundles') })
  const forbidden = await runCtl(['--context', context('node', [url], nodeBundle), 'nodes'], { home })
  t.equal(forbidden.code, 1)
  t.match(forbidden.stderr, /^pxe-ctl: error: forbidden: .* \(from https:\/\/127\.0\.0\.1:\d+\); the bundle .* holds a node certificate of node-z; pxe-ctl needs an operator bundle/)

  const failed = await fakeController(409, { error: 'reshard_in_progress', message: 'a reshard to 128 shards is in progress' })
  const res = await runCtl(['--context', context('busy', [failed.url]), 'reshard', '256'], { home })
  t.equal(res.code, 1)
  t.match(res.stderr, `pxe-ctl: error: reshard_in_progress: a reshard to 128 shards is in progress (from ${failed.url})`)
  t.same(JSON.parse(failed.seen[0]!.body), { total_shards: 256 })
})

t.test('crl push: the file is checked first; sent as application/pkix-crl; a 404 means no CRL push', async (t) => {
  const crl = join(pki.dir, 'crl.pem')
  const accepting = await fakeController(200, { crl_number: 7, this_update: '2026-12-01T00:00:00.000Z' })
  const ok = await runCtl(['--context', context('crl', [accepting.url]), 'crl', 'push', crl], { home })
  t.equal(ok.code, 0, ok.stderr)
  t.match(ok.stdout, `CRL installed by ${accepting.url}`)
  t.match(ok.stdout, /^crl_number\s+7$/m)
  t.match(accepting.seen[0], { method: 'POST', url: '/v1/crl', contentType: 'application/pkix-crl', body: readFileSync(crl, 'utf8') })

  const missing = await fakeController(404, { error: 'not_found', message: 'no such endpoint' })
  const old = await runCtl(['--context', context('crl-404', [missing.url]), 'crl', 'push', crl], { home })
  t.equal(old.code, 1)
  t.match(old.stderr, /^pxe-ctl: error: this controller does not accept CRL pushes/)

  const big = join(root, 'big.pem')
  writeFileSync(big, `-----BEGIN X509 CRL-----\n${'A'.repeat(1024 * 1024)}\n-----END X509 CRL-----\n`)
  const garbage = join(root, 'garbage.pem')
  writeFileSync(garbage, 'hello')
  const cases: [string, string, RegExp][] = [
    ['a certificate', join(pki.dir, 'ca.pem'), /is not a PEM CRL/],
    ['garbage', garbage, /is not a PEM CRL/],
    ['over 1 MiB', big, /over the 1 MiB a CRL push may carry/],
    ['a missing file', join(root, 'nope.pem'), /cannot read .*nope\.pem \(ENOENT\)/],
  ]
  const before = accepting.seen.length
  for (const [what, file, message] of cases) {
    const res = await runCtl(['--context', context('crl', [accepting.url]), 'crl', 'push', file], { home })
    t.equal(res.code, 1, what)
    t.match(res.stderr, message, what)
  }
  t.equal(accepting.seen.length, before, 'nothing was sent')
})
