// The etcd test harness itself: skipping without a binary (but failing in CI), and a member's life:
// frozen, woken, killed, restarted on its data, and gone with its folder after close.
import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { needsEtcd, processAlive, startEtcdCluster } from '../support/etcd-cluster.js'

const state = (pid: number) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0]

t.test('without an etcd binary: skipped outside CI, failing in CI', async (t) => {
  const saved = { ETCD_BIN: process.env.ETCD_BIN, CI: process.env.CI }
  t.teardown(() => {
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]
    else process.env[k] = v
  })
  process.env.ETCD_BIN = '/nonexistent/etcd'
  delete process.env.CI
  t.match(needsEtcd().skip, /no etcd binary found/, 'skipped, with the reason')
  process.env.CI = 'true'
  t.same(needsEtcd(), {}, 'in CI the test runs')
  await t.rejects(startEtcdCluster(t, 1), /no etcd binary found: CI must install etcd-server/, '...and fails with a clear message')
})

t.test('a member can be frozen, woken, killed and restarted; close leaves nothing', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const client = await cluster.client(t)
  await client.txn({ compare: [], success: [{ type: 'put', key: '/h/k', value: 'kept' }] })
  const first = cluster.members[0]!.process!.pid!
  await cluster.freeze(0)
  t.equal(state(first), 'T', 'SIGSTOP: stopped')
  await cluster.thaw(0)
  t.not(state(first), 'T', 'SIGCONT: running again')
  await cluster.kill(0)
  t.notOk(processAlive(first), 'kill -9: gone')
  t.equal(cluster.members[0]!.process, null)
  await cluster.restart(0)
  const second = cluster.members[0]!.process!.pid!
  t.not(second, first, 'restarted as a new process')
  t.equal((await client.range({ key: '/h/k' })).kvs[0]?.value.toString(), 'kept', 'on its data')
  await cluster.close()
  t.notOk(processAlive(second), 'close kills the member')
  t.notOk(existsSync(cluster.dir), 'and removes the folder with the data and the keys')
})
