// The cluster's pushed CRL in one HA replica, in-process over a real etcd: a term loads the copy in etcd
// before it serves even when the replica never followed the key (the start-up race: elected before its
// watch is up), and a save over a copy that moved since it was read is refused (compare-and-swap). A
// push's own write reaching the replica's watch before its answer is left to the push to install (so the
// audit names the operator), and a write whose answer was lost is installed from the cluster's copy.
import t, { type Test } from 'tap'
import { X509Certificate } from 'node:crypto'
import { copyFileSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { writeCrl } from '../../pki/revocation.js'
import { HaServiceHost } from '../../src/backends/ha-backend.js'
import { EtcdClientError, type EtcdClient, type TxnRequest, type TxnResult } from '../../src/ha/etcd-api.js'
import { CrlEnforcement } from '../../src/identity/crl-enforcement.js'
import { parseCrl } from '../../src/identity/crl.js'
import { makePki } from '../e2e/harness.js'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'
import { testDir } from '../support/test-dir.js'
import { until } from './replica.js'

type Cluster = Awaited<ReturnType<typeof startEtcdCluster>>
type Pki = Awaited<ReturnType<typeof makePki>>

/**
 * One HA replica in-process: CRL enforcement on its `tls.crl` copy and a service host on `prefix`, with
 * every audited event kept. `installTls` stands for the TLS server (by default it always succeeds).
 */
function soloReplica(t: Test, cluster: Cluster, pki: Pki, copy: string, prefix: string, client: EtcdClient, installTls: () => void = () => undefined) {
  const audit: { event: string; fields: Record<string, unknown> }[] = []
  const record = (event: string, fields: Record<string, unknown>) => void audit.push({ event, fields })
  const crls = new CrlEnforcement(parseCrl(readFileSync(copy, 'utf8')), { path: copy, ca: new X509Certificate(pki.ca), intervalMs: 200, audit: { record } })
  crls.start({ installTls, dropRevoked: () => ({ closedConnections: 0, removedNodes: [] }), recordCrlNumber: () => undefined })
  t.teardown(() => crls.stop())
  const host = new HaServiceHost(
    { ha: { etcd: cluster.connection, prefix, leaseTtlSeconds: 2, maxTxnOps: 128 }, controllerId: 'solo', client, crlPath: copy },
    {
      settings: { totalShards: 16, maxConcurrency: 1, leaseSeconds: 30, identifyIntervalMs: 5100, dailyIdentifyLimit: null },
      now: Date.now,
      audit: { record },
      isRevoked: crls.isRevoked,
      crlInForce: () => crls.inForce,
      offerCrl: (pem, origin) => crls.offer(pem, origin),
    },
  ).start()
  t.teardown(() => host.stop())
  return { audit, crls, host }
}

/** An etcd member and a PKI; the replica's `tls.crl` copy holds CRL 1, and `out2` a newer CRL 2 of the same CA. */
async function crlOneAndTwo(t: Test) {
  const root = testDir(t)
  const [cluster, pki] = await Promise.all([startEtcdCluster(t, 1), makePki(root)])
  const copy = join(root, 'controller-crl.pem')
  copyFileSync(join(pki.dir, 'crl.pem'), copy)
  const out2 = join(root, 'crl-2.pem')
  await writeCrl(pki.dir, { out: out2 })
  return { cluster, pki, copy, out2 }
}

t.test('a new term installs the cluster CRL before serving; a stale save is refused', needsEtcd(), async (t) => {
  const root = testDir(t)
  const [cluster, pki] = await Promise.all([startEtcdCluster(t, 1), makePki(root)])
  const copy = join(root, 'controller-crl.pem')
  copyFileSync(join(pki.dir, 'crl.pem'), copy) // CRL 1, the replica's own file
  const out2 = join(root, 'crl-2.pem')
  const out3 = join(root, 'crl-3.pem')
  await writeCrl(pki.dir, { out: out2 })
  await writeCrl(pki.dir, { out: out3 })
  const prefix = '/pxe-cluster-crl/'
  const key = `${prefix}crl/pushed`
  const client = await cluster.client(t)
  // a copy pushed earlier (written here without a fence: only its presence matters)
  await client.txn({ compare: [], success: [{ type: 'put', key, value: readFileSync(out2, 'utf8') }] })

  // follow() is never called: only the term's own read can bring the copy in
  const { audit, crls, host } = soloReplica(t, cluster, pki, copy, prefix, await cluster.client(t))
  await until(() => host.isLeader(), 10_000, 'the replica leads')
  t.equal(crls.inForce.crlNumber, 2n, 'the term installed the cluster copy before serving')
  t.match(audit.find((e) => e.event === 'crl_loaded'), { fields: { source: 'cluster', crl_number: '2' } })

  const third = parseCrl(readFileSync(out3, 'utf8'))
  const version = await host.crlStore.prepare()
  // another writer moves the key meanwhile (in life: a leader that was deposed without knowing)
  await client.txn({ compare: [], success: [{ type: 'put', key, value: readFileSync(out2, 'utf8') }] })
  await t.rejects(host.crlStore.save(third, version), { code: 'unavailable', message: /changed meanwhile/ }, 'a save over a moved copy is refused')
  t.equal((await client.range({ key })).kvs[0]?.value.toString(), readFileSync(out2, 'utf8'), 'the key holds what the other writer put')
  await host.crlStore.save(third, await host.crlStore.prepare())
  t.equal((await client.range({ key })).kvs[0]?.value.toString(), third.pem, 'a save over the copy just read commits')
})

t.test('a cluster copy whose install failed here is offered again, not taken as in force', needsEtcd(), async (t) => {
  const { cluster, pki, copy, out2 } = await crlOneAndTwo(t)
  const prefix = '/pxe-cluster-crl-retry/'
  const client = await cluster.client(t)
  let failures = 1 // the first install fails (in life: OpenSSL refusing the context for a moment)
  const { audit, crls, host } = soloReplica(t, cluster, pki, copy, prefix, await cluster.client(t), () => {
    if (failures-- > 0) throw new Error('the TLS context could not be rebuilt')
  })
  host.crlStore.follow?.()
  await until(() => host.isLeader(), 10_000, 'the replica leads')
  await client.txn({ compare: [], success: [{ type: 'put', key: `${prefix}crl/pushed`, value: readFileSync(out2, 'utf8') }] })
  await until(() => crls.inForce.crlNumber === 2n, 10_000, 'the cluster copy is in force after a failed first install')
  t.match(audit.find((e) => e.event === 'crl_refused'), { fields: { source: 'cluster', reason: 'install_failed' } }, 'the failure was audited')
  t.match(audit.find((e) => e.event === 'crl_loaded'), { fields: { source: 'cluster', crl_number: '2' } })
})

t.test('the leader publishes its CRL in force when the cluster copy is older, so a take-over finds it', needsEtcd(), async (t) => {
  const root = testDir(t)
  const [cluster, pki] = await Promise.all([startEtcdCluster(t, 1), makePki(root)])
  const old = join(root, 'crl-1.pem')
  copyFileSync(join(pki.dir, 'crl.pem'), old) // CRL 1: what the cluster holds
  const copy = join(root, 'controller-crl.pem')
  await writeCrl(pki.dir, { out: copy }) // CRL 2: a newer tls.crl copied to this replica alone
  const prefix = '/pxe-cluster-crl-publish/'
  const key = `${prefix}crl/pushed`
  const client = await cluster.client(t)
  await client.txn({ compare: [], success: [{ type: 'put', key, value: readFileSync(old, 'utf8') }] })
  const { audit, crls, host } = soloReplica(t, cluster, pki, copy, prefix, await cluster.client(t))
  host.crlStore.follow?.()
  await until(() => host.isLeader(), 10_000, 'the replica leads')
  const stored = async () => parseCrl((await client.range({ key })).kvs[0]!.value.toString()).crlNumber
  const started = performance.now()
  while ((await stored()) !== 2n && performance.now() - started < 10_000) await new Promise((r) => setTimeout(r, 100))
  t.equal(await stored(), 2n, 'the cluster copy is now the leader\'s newer CRL')
  t.equal(crls.inForce.crlNumber, 2n, 'and the older cluster copy was refused, not installed')
  t.match(audit.find((e) => e.event === 'crl_refused'), { fields: { source: 'cluster', reason: 'older_crl' } })
  // a push prepared now finds the revision the publish left
  const out3 = join(root, 'crl-3.pem')
  await writeCrl(pki.dir, { out: out3 })
  await host.crlStore.save(parseCrl(readFileSync(out3, 'utf8')), await host.crlStore.prepare())
  t.equal(await stored(), 3n, 'a push after the publish commits')
})

/**
 * `client` with the answers of transactions that put `key` held back until `hold` resolves (what a loaded
 * event loop or a slow network does to them), or lost after etcd committed (while `lose` says so).
 */
function slowAnswers(client: EtcdClient, key: string, after: { hold?: () => Promise<void>; lose?: () => boolean }): EtcdClient {
  const puts = (req: TxnRequest) => req.success.some((op) => op.type === 'put' && op.key === key)
  return {
    grantLease: (ttl, timeoutMs) => client.grantLease(ttl, timeoutMs),
    keepAliveOnce: (id, timeoutMs) => client.keepAliveOnce(id, timeoutMs),
    revokeLease: (id, timeoutMs) => client.revokeLease(id, timeoutMs),
    range: (req, timeoutMs) => client.range(req, timeoutMs),
    txn: async (req, timeoutMs): Promise<TxnResult> => {
      const res = await client.txn(req, timeoutMs)
      if (!puts(req)) return res
      await after.hold?.()
      if (after.lose?.() === true) throw new EtcdClientError('timeout', 'the answer was lost (test)')
      return res
    },
    watchPrefix: (prefix, onChange) => client.watchPrefix(prefix, onChange),
    close: () => client.close(),
  }
}

t.test('a push whose own watch sees its write first still installs it as the push', needsEtcd(), async (t) => {
  const { cluster, pki, copy, out2 } = await crlOneAndTwo(t)
  const prefix = '/pxe-cluster-crl-own-watch/'
  const key = `${prefix}crl/pushed`
  let watched = 0
  let saving = Infinity // the watch count when the save began
  // the save's answer comes only after the replica's own watch delivered the write (and a read followed)
  const hold = async () => {
    if (saving === Infinity) return // not the save under test (the leader publishing its CRL in force, say)
    const started = performance.now()
    while (watched <= saving && performance.now() - started < 15_000) await new Promise((r) => setTimeout(r, 10))
    await new Promise((r) => setTimeout(r, 300))
  }
  const client = slowAnswers(await cluster.client(t), key, { hold })
  const watching: EtcdClient = {
    ...client,
    watchPrefix: (p, onChange) => client.watchPrefix(p, () => {
      watched++
      onChange()
    }),
  }
  const { audit, crls, host } = soloReplica(t, cluster, pki, copy, prefix, watching)
  host.crlStore.follow?.()
  await until(() => host.isLeader(), 10_000, 'the replica leads')
  const second = parseCrl(readFileSync(out2, 'utf8'))
  const version = await host.crlStore.prepare()
  saving = watched
  await host.crlStore.save(second, version)
  t.ok(watched > saving, 'the watch delivered the write before the save resolved')
  t.equal(crls.inForce.crlNumber, 1n, 'the watch did not install the copy being saved')
  t.notOk(audit.some((e) => e.event === 'crl_loaded' && e.fields['crl_number'] === '2'), 'nor audit it as the cluster\'s')
  t.equal(crls.offer(second.pem, { source: 'push', by: 'ops-alice' }).kind, 'loaded', 'the push installs it')
  t.match(audit.filter((e) => e.event === 'crl_loaded').at(-1), { fields: { source: 'push', by: 'ops-alice', crl_number: '2' } })
})

t.test('a save whose answer was lost after etcd committed: the cluster copy is installed all the same', needsEtcd(), async (t) => {
  const { cluster, pki, copy, out2 } = await crlOneAndTwo(t)
  const prefix = '/pxe-cluster-crl-lost-answer/'
  const key = `${prefix}crl/pushed`
  let lose = false
  const client = slowAnswers(await cluster.client(t), key, { lose: () => lose })
  const { audit, crls, host } = soloReplica(t, cluster, pki, copy, prefix, client)
  host.crlStore.follow?.()
  await until(() => host.isLeader(), 10_000, 'the replica leads')
  const second = parseCrl(readFileSync(out2, 'utf8'))
  const version = await host.crlStore.prepare()
  lose = true
  await t.rejects(host.crlStore.save(second, version), { message: /lost/ }, 'the save fails for its caller')
  lose = false
  t.equal((await client.range({ key })).kvs[0]?.value.toString(), second.pem, 'though etcd committed it')
  await until(() => crls.inForce.crlNumber === 2n, 15_000, 'the cluster copy in force')
  t.match(audit.filter((e) => e.event === 'crl_loaded').at(-1), { fields: { source: 'cluster', crl_number: '2' } })
})
