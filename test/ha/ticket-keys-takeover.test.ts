// Shared TLS session-ticket keys under HA (src/server/shared-ticket-keys.ts), with the compiled controller
// in its own processes over a real etcd: the leader publishes its keys sealed (etcd never holds them in the
// clear), the follower adopts them, so that a node's session from the leader resumes on the follower and,
// after kill -9 of the leader, on the new leader; a record changed in etcd is not used and the leader
// replaces it; a CRL change rotates the keys on every replica.
import t from 'tap'
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import tls from 'node:tls'
import { revoke } from '../../pki/revocation.js'
import { TicketSealKey } from '../../src/server/ticket-key-seal.js'
import { loadPlanKeys } from '../../src/signing/plan-keys.js'
import { bundle, checkinBody, makePki, request, type Identity } from '../e2e/harness.js'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'
import { pushCrl } from '../support/crl-push.js'
import { haSection, leadingReplicas, spawnReplicaController, type ReplicaProcess } from './ha-fleet.js'
import { until } from './replica.js'

const TTL = 2
const PREFIX = '/pxe-ticket-keys/'
const KEY = `${PREFIX}tls/ticket-keys`
const root = mkdtempSync(join(tmpdir(), 'pxe-ha-tickets-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))

/** One TLS connection as `id` (offering `session`); resolves with whether it resumed and the ticket it was given. */
function connect(port: number, ca: string, id: Identity, session?: Buffer): Promise<{ reused: boolean; session: Buffer; socket: tls.TLSSocket }> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca, cert: id.cert, key: id.key, ...(session ? { session } : {}) })
    socket.once('error', reject)
    // TLS 1.3 hands the ticket out after the handshake: wait for it.
    socket.once('session', (ticket: Buffer) => resolve({ reused: socket.isSessionReused(), session: ticket, socket }))
    setTimeout(() => reject(new Error('no session ticket within 5 s')), 5000).unref()
  })
}

/** Whether a connection offering `session` resumes it (a resumed handshake need not hand out a new ticket). */
function resumes(port: number, ca: string, id: Identity, session: Buffer): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca, cert: id.cert, key: id.key, session })
    socket.once('error', reject)
    socket.once('secureConnect', () => {
      resolve(socket.isSessionReused())
      socket.destroy()
    })
  })
}

t.test('a session made with the leader resumes on the follower and on the new leader after kill -9', needsEtcd(), async (t) => {
  const [cluster, pki] = await Promise.all([startEtcdCluster(t, 1), makePki(root)])
  const [node, op] = await Promise.all([bundle(pki, 'node-a', 'node'), bundle(pki, 'ops-alice', 'operator')])
  const copy = join(root, 'controller-crl.pem')
  copyFileSync(join(pki.dir, 'crl.pem'), copy)
  const tlsFiles = { ca: join(pki.dir, 'ca.pem'), cert: join(pki.dir, 'server.pem'), key: join(pki.dir, 'server-key.pem'), crl: copy }
  const ha = haSection(cluster, PREFIX, TTL)
  const spawn = (id: string) => spawnReplicaController(t, pki, root, id, ha, { tls: tlsFiles })
  const replicas: ReplicaProcess[] = await Promise.all([spawn('ctl-0'), spawn('ctl-1')])
  const leading = (among: readonly ReplicaProcess[]) => leadingReplicas(among, pki.ca, op)
  await until(async () => (await leading(replicas)).length === 1, 30_000, 'a leader')
  const [leader] = await leading(replicas)
  const follower = replicas.find((r) => r !== leader)!
  const etcd = await cluster.client(t)
  const stored = async () => (await etcd.range({ key: KEY })).kvs[0]

  await until(async () => (await stored()) !== undefined, 15_000, 'the leader publishes its ticket keys')
  const record = JSON.parse((await stored())!.value.toString('utf8')) as Record<string, unknown>
  t.same(Object.keys(record).sort(), ['created_at', 'crl_sha256', 'nonce', 'seal_id', 'sealed', 'v'], 'a sealed record: no key in the clear')
  t.match(record, { v: 1, crl_sha256: /^[0-9a-f]{64}$/, seal_id: /^[0-9a-f]{32}$/ })

  const first = await connect(leader!.port, pki.ca, node)
  t.notOk(first.reused, 'the first connection is a full handshake')
  first.socket.destroy()
  await until(() => resumes(follower.port, pki.ca, node, first.session), 10_000, 'the follower adopts the keys')
  t.pass("the leader's session resumes on the follower")

  leader!.signal('SIGKILL')
  await until(async () => (await leading([follower])).length === 1, 8 * TTL * 1000, 'the follower leads')
  t.ok(await resumes(follower.port, pki.ca, node, first.session), 'after the take-over the session from the old leader resumes on the new one')
  const checkin = await request(follower.port, pki.ca, node, '/v1/checkin', { body: checkinBody('node-a') })
  t.equal(checkin.status, 200, 'and the node is served')

  // A record changed in etcd (an etcd writer without the plan key) is not used; the leader replaces it.
  const tampered = { ...record, created_at: Number(record.created_at) + 1 }
  await etcd.txn({ compare: [], success: [{ type: 'put', key: KEY, value: JSON.stringify(tampered) }] })
  const fresh = await spawn('ctl-2')
  await until(() => /TLS session-ticket key record in etcd not used.*tampered|tampered.*not used/.test(fresh.output() + follower.output()), 15_000, 'the changed record is logged as not used')
  await until(async () => {
    const now = JSON.parse((await stored())!.value.toString('utf8')) as Record<string, unknown>
    return now.created_at !== tampered.created_at
  }, 15_000, 'the leader replaces the changed record')
  const newLeaderSession = await connect(follower.port, pki.ca, node)
  newLeaderSession.socket.destroy()
  await until(() => resumes(fresh.port, pki.ca, node, newLeaderSession.session), 10_000, 'the replica started meanwhile adopts the replaced record')
  t.pass('a replica started while the record was changed adopts the one the leader put back')
  // The keys in force, opened as a replica does (the plan key and the prefix): never in any replica's log.
  const opened = TicketSealKey.derive((await loadPlanKeys(join(pki.dir, 'plan-keys.json'))).privateKey, PREFIX).open(JSON.parse((await stored())!.value.toString('utf8')))
  if (!('keys' in opened)) throw new Error(`the record does not open: ${opened.detail}`)
  const logs = leader!.output() + fresh.output() + follower.output()
  for (const encoding of ['base64', 'hex', 'base64url'] as const) t.notOk(logs.includes(opened.keys.toString(encoding).slice(0, 16)), `no ticket key in the logs (${encoding})`)

  // A CRL change rotates the keys: no session from before resumes, on any replica.
  const out = join(root, 'push.pem')
  await bundle(pki, 'node-z', 'node')
  await revoke(pki.dir, { name: 'node-z' }, { out })
  const pushed = await pushCrl(follower.port, pki.ca, op, readFileSync(out, 'utf8'))
  t.equal(pushed.status, 200, pushed.text)
  await until(async () => {
    const now = JSON.parse((await stored())!.value.toString('utf8')) as Record<string, unknown>
    return now.crl_sha256 !== record.crl_sha256
  }, 15_000, 'the record holds keys of the new CRL')
  t.notOk(await resumes(follower.port, pki.ca, node, newLeaderSession.session), 'a session from before the CRL change does not resume on the leader')
  t.notOk(await resumes(fresh.port, pki.ca, node, newLeaderSession.session), 'nor on the follower')
  const rotated = await connect(follower.port, pki.ca, node)
  rotated.socket.destroy()
  await until(() => resumes(fresh.port, pki.ca, node, rotated.session), 10_000, 'the follower adopts the new keys')
  t.pass('a session made after the CRL change resumes across replicas again')
})
