// pxe-ctl against a real HA pair on etcd: the follower listed first answers 503 not_leader naming the
// leader and is skipped; after the leader stops, the other replica takes over and the same context
// (the old leader first, now down) reaches it.
import t from 'tap'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { issueBundle } from '../../pki/issue-certs.js'
import { makePki } from '../e2e/harness.js'
import { haSection, startReplicaController } from '../ha/ha-fleet.js'
import { until } from '../ha/replica.js'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'
import { testDir } from '../support/test-dir.js'
import { runCtl, writeContext } from './support.js'

const TTL = 2

t.test('an HA pair: the follower is skipped, and after a take-over the new leader answers', needsEtcd(), async (t) => {
  const root = testDir(t)
  const pki = await makePki(root)
  const { bundleDir } = await issueBundle(pki.dir, 'alice', 'operator', { outDir: join(root, 'bundles') })
  const home = join(root, 'home')
  mkdirSync(home)
  const cluster = await startEtcdCluster(t, 1)
  const ha = haSection(cluster, '/pxe-ctl-ha/', TTL)
  const replicas = [await startReplicaController(t, pki, root, 'ctl-a', ha), await startReplicaController(t, pki, root, 'ctl-b', ha)]
  await until(() => replicas.filter((r) => r.host.isLeader()).length === 1, 8 * TTL * 1000, 'one leader')
  const leader = replicas.find((r) => r.host.isLeader())!
  const follower = replicas.find((r) => r !== leader)!
  const urlOf = (r: typeof leader) => `https://127.0.0.1:${r.port}`
  const context = join(root, 'context.json')
  writeContext(context, [urlOf(follower), urlOf(leader)], bundleDir)

  const res = await runCtl(['--context', context, 'status', '-v'], { home })
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, new RegExp(`^leader\\s+${leader.id}$`, 'm'))
  t.match(res.stdout, `controller        ${urlOf(leader)}`)
  t.match(res.stderr, `GET /v1/plan → ${urlOf(follower)}: 503 not_leader: `)
  t.match(res.stderr, `the leader is ${leader.id}; trying the next controller`)

  await leader.stop()
  await until(() => follower.host.isLeader(), 8 * TTL * 1000, 'the follower takes over')
  writeContext(context, [urlOf(leader), urlOf(follower)], bundleDir)
  const after = await runCtl(['--context', context, 'status', '-v'], { home })
  t.equal(after.code, 0, after.stderr)
  t.match(after.stdout, new RegExp(`^leader\\s+${follower.id}$`, 'm'))
  t.match(after.stderr, `GET /v1/plan → ${urlOf(leader)}: connection refused; trying the next controller`)
})
