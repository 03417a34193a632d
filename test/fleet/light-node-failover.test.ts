// The fleet benchmark's light node (bench/fleet/scale/light-node.ts) fails over as the agent's
// ControllerClient does, over real mTLS sockets: a replica that answered 503 keeps its keep-alive
// connection while the node tries the other port, as the agent's https.Agent per URL keeps its socket,
// so the node's next attempt there makes no second handshake. (The light node once held one connection
// for all ports and closed it on every switch: in a take-over every node that met a follower's 503
// opened a new connection to it when it led.)
import t from 'tap'
import https from 'node:https'
import net from 'node:net'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { createSecureContext } from 'node:tls'
import { bundle, makePki } from '../e2e/harness.js'
import { testDir } from '../support/test-dir.js'
import { closedPort } from '../support/closed-port.js'
import { LightNode } from '../../bench/fleet/scale/light-node.js'

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'compaq-01', 'node')
const context = createSecureContext({ ca: pki.ca, cert: node.cert, key: node.key, minVersion: 'TLSv1.2' })

/** A replica that follows: every request gets the controller's 503 `not_leader`, on a kept-alive connection. */
const follower = https.createServer(
  { ca: pki.ca, cert: readFileSync(join(pki.dir, 'server.pem')), key: readFileSync(join(pki.dir, 'server-key.pem')), requestCert: true, rejectUnauthorized: true },
  (req, res) => {
    req.resume()
    req.on('end', () => {
      const body = JSON.stringify({ error: 'not_leader', message: 'this controller is not the leader; the leader is ctl-1' })
      res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body)
    })
  },
)
let handshakes = 0
let requests = 0
follower.on('secureConnection', () => (handshakes += 1))
follower.on('request', () => (requests += 1))
await new Promise<void>((resolve) => follower.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => {
  follower.closeAllConnections()
  follower.close(() => resolve())
}))

t.test('a replica that answered 503 keeps its connection while the node tries the dead leader', async (t) => {
  const counts = new Map<string, number>()
  const ports = [await closedPort(), (follower.address() as net.AddressInfo).port]
  const light = new LightNode('compaq-01', 8, context, '127.0.0.1', { ports, count: (name, _sample, by = 1) => void counts.set(name, (counts.get(name) ?? 0) + by) })
  t.teardown(() => light.stop())
  light.start(0)
  // Each attempt goes to both ports, starting with the dead one or the follower by turns (failover-order.ts);
  // a joining node retries after 0.25-0.75 s, 0.5-1.5 s, 1-3 s.
  const answered = () => counts.get('status_503_not_leader') ?? 0
  const waitFor = async (n: number) => {
    const until = Date.now() + 10_000
    while (answered() < n && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  await waitFor(3)
  t.equal(answered(), 3, `the node read three 503s: ${JSON.stringify(Object.fromEntries(counts))}`)
  t.equal(requests, 3, 'the follower was asked three times')
  t.equal(handshakes, 1, 'one TLS handshake with the follower, however many attempts')
  t.equal(counts.get('handshakes'), 1, 'the node counted one handshake')
  // The follower drops its idle connections (a keep-alive timeout, a restart): the node opens a new one.
  follower.closeAllConnections()
  await waitFor(4)
  t.equal(answered(), 4, 'asked again')
  t.equal(handshakes, 2, 'on a new connection: the closed one was not reused')
  t.equal(counts.get('handshakes'), 2)
})
