// POST /v1/crl under HA, with the compiled controller in its own processes over a real etcd: the leader
// stores the pushed CRL in etcd (a follower refuses the push with not_leader), every replica installs it
// within 2 s (the follower's open connection of the revoked node closed), a refused push leaves the etcd
// key as it was, and after kill -9 of the leader the new leader and a freshly started replica enforce it.
import t from 'tap'
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import https from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { revoke } from '../../pki/revocation.js'
import { bundle, checkinBody, makePki, request } from '../e2e/harness.js'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'
import { pushCrl, within } from '../support/crl-push.js'
import { auditOf, haSection, leadingReplicas, spawnReplicaController, type ReplicaProcess } from './ha-fleet.js'
import { until } from './replica.js'

const TTL = 2
const PREFIX = '/pxe-crl-push/'
const root = mkdtempSync(join(tmpdir(), 'pxe-ha-crl-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))

t.test('a pushed CRL reaches every replica through etcd and survives a take-over', needsEtcd(), async (t) => {
  const [cluster, pki] = await Promise.all([startEtcdCluster(t, 1), makePki(root)])
  const [nodeA, nodeB, op] = await Promise.all([bundle(pki, 'node-a', 'node'), bundle(pki, 'node-b', 'node'), bundle(pki, 'ops-alice', 'operator')])
  // Every replica reads the same exported copy, which pxe-pki revoke does not touch: only the push reaches them.
  const copy = join(root, 'controller-crl.pem')
  copyFileSync(join(pki.dir, 'crl.pem'), copy)
  const firstCrl = readFileSync(copy, 'utf8')
  const tls = { ca: join(pki.dir, 'ca.pem'), cert: join(pki.dir, 'server.pem'), key: join(pki.dir, 'server-key.pem'), crl: copy }
  const ha = haSection(cluster, PREFIX, TTL)
  const spawn = (id: string) => spawnReplicaController(t, pki, root, id, ha, { tls })
  const replicas: ReplicaProcess[] = await Promise.all([spawn('ctl-0'), spawn('ctl-1')])
  const leading = (among: readonly ReplicaProcess[]) => leadingReplicas(among, pki.ca, op)
  await until(async () => (await leading(replicas)).length === 1, 30_000, 'a leader')
  const [leader] = await leading(replicas)
  const follower = replicas.find((r) => r !== leader)!
  const refuses = (r: ReplicaProcess, id: typeof nodeA) => request(r.port, pki.ca, id, '/v1/keys').then(() => false, () => true)
  const etcd = await cluster.client(t)
  const stored = async () => (await etcd.range({ key: `${PREFIX}crl/pushed` })).kvs[0]

  // node-a holds a keep-alive connection to the follower (GET /v1/keys is served there)
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  t.equal((await request(follower.port, pki.ca, nodeA, '/v1/keys', { agent })).status, 200, 'node-a connects to the follower')
  const socket = Object.values(agent.freeSockets).flat()[0]!
  let closed = false
  socket.once('close', () => (closed = true))
  t.equal((await request(leader!.port, pki.ca, nodeA, '/v1/checkin', { body: checkinBody('node-a') })).status, 200, 'node-a checks in with the leader')

  const out = join(root, 'push-1.pem')
  const { crlNumber } = await revoke(pki.dir, { name: 'node-a' }, { out })
  const pem = readFileSync(out, 'utf8')
  const atFollower = await pushCrl(follower.port, pki.ca, op, pem)
  t.match([atFollower.status, atFollower.json], [503, { error: 'not_leader', message: new RegExp(`the leader is ${leader!.id}`) }], 'a follower refuses the push, naming the leader')
  // (The leader may have published its own CRL in force by now: its CRL side does so within 2 s of leading
  // when etcd holds none. What must not be there is the pushed one.)
  t.not((await stored())?.value.toString(), pem, 'the push did not reach etcd through the follower')

  const pushed = await pushCrl(leader!.port, pki.ca, op, pem)
  t.equal(pushed.status, 200, pushed.text)
  t.match(pushed.json, { crl_number: String(crlNumber), revoked: 1, changed: true })
  t.equal((await stored())?.value.toString(), pem, 'the leader stored it in etcd under the prefix')
  const elapsed = await within(2000, async () => closed && (await refuses(follower, nodeA)) && (await refuses(leader!, nodeA)))
  t.ok(elapsed >= 0, `both replicas refuse node-a and the follower closed its connection within 2 s (took ${elapsed} ms)`)
  t.match(auditOf(leader!.root).filter((e) => e.event === 'crl_loaded').at(-1), { source: 'push', by: 'ops-alice', crl_number: String(crlNumber) })
  t.match(auditOf(follower.root).filter((e) => e.event === 'crl_loaded').at(-1), { source: 'cluster', crl_number: String(crlNumber), closed_connections: 1 })

  const before = await stored()
  const older = await pushCrl(leader!.port, pki.ca, op, firstCrl)
  t.match([older.status, older.json?.message], [400, /older_crl/], 'an older CRL is refused with the reason')
  t.equal((await stored())?.modRevision, before?.modRevision, 'the etcd key did not change')
  t.match(auditOf(leader!.root).filter((e) => e.event === 'crl_refused').at(-1), { source: 'push', by: 'ops-alice', reason: 'older_crl' }, 'audited as refused')

  // kill -9 of the leader: the follower takes over with the pushed CRL in force
  leader!.signal('SIGKILL')
  await until(async () => (await leading([follower])).length === 1, 8 * TTL * 1000, 'the follower leads')
  t.ok(await refuses(follower, nodeA), 'the new leader still refuses node-a')
  t.equal((await request(follower.port, pki.ca, nodeB, '/v1/checkin', { body: checkinBody('node-b') })).status, 200, 'and serves node-b')

  // a replica started afresh (its tls.crl still the old copy) picks the pushed CRL up from etcd
  const fresh = await spawn('ctl-2')
  t.ok((await within(2000, () => refuses(fresh, nodeA))) >= 0, 'a freshly started replica refuses node-a within 2 s')
  t.equal((await request(fresh.port, pki.ca, nodeB, '/v1/keys')).status, 200, 'and serves node-b')

  // the new leader takes the next push, and it reaches the fresh replica
  const out2 = join(root, 'push-2.pem')
  await revoke(pki.dir, { name: 'node-b' }, { out: out2 })
  const second = await pushCrl(follower.port, pki.ca, op, readFileSync(out2))
  t.equal(second.status, 200, second.text)
  t.ok((await within(2000, () => refuses(fresh, nodeB))) >= 0, 'the fresh replica refuses node-b within 2 s')

  // and it takes over in turn: it serves (its CRL is not older than the state's number) and enforces both revocations
  follower.signal('SIGKILL')
  await until(async () => (await leading([fresh])).length === 1, 8 * TTL * 1000, 'the fresh replica leads')
  t.ok((await refuses(fresh, nodeA)) && (await refuses(fresh, nodeB)), 'the replica started after the push leads with both revocations in force')
  t.notOk(fresh.output().includes('cannot serve as leader'), 'it did not step down for an older CRL')

  // no replica left: one started now leads at once, and its term loads the cluster's CRL before it serves
  // (the state records CRL number 3; its own tls.crl is number 1)
  fresh.signal('SIGKILL')
  await new Promise((resolve) => setTimeout(resolve, TTL * 1000 + 500)) // the killed leader's lease expires
  const last = await spawn('ctl-3')
  await until(async () => (await leading([last])).length === 1, 8 * TTL * 1000, 'the last replica leads')
  t.ok((await refuses(last, nodeA)) && (await refuses(last, nodeB)), 'a replica that leads from its start enforces the pushed CRL')
  t.notOk(last.output().includes('cannot serve as leader'), 'and serves: its CRL is not older than the state\'s')
})
