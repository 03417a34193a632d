// Paged reads of a prefix at one revision: while another client keeps writing, the pages together are
// exactly what a single read at that revision returns.
import t from 'tap'
import { performance } from 'node:perf_hooks'
import { prefixRangeEnd, type EtcdClient } from '../../src/ha/etcd-api.js'
import { DEFAULT_ETCD_LIMITS } from '../../src/ha/etcd-limits.js'
import { readPrefix } from '../../src/ha/paged-read.js'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'

const PREFIX = '/pxe-paged/nodes/'
const key = (i: number) => `${PREFIX}${String(i).padStart(4, '0')}`

async function putAll(client: EtcdClient, from: number, to: number, value: string): Promise<void> {
  for (let start = from; start < to; start += 100) {
    const ops = []
    for (let i = start; i < Math.min(to, start + 100); i++) ops.push({ type: 'put' as const, key: key(i), value: `${value}:${'x'.repeat(2000)}` })
    await client.txn({ compare: [], success: ops })
  }
}

/** Rewrites and adds keys until stopped; returns the times at which its writes committed. */
function writeMeanwhile(client: EtcdClient): { commits: number[]; stop(): Promise<void> } {
  const commits: number[] = []
  let running = true
  const loop = (async () => {
    for (let n = 0; running; n++) {
      await client.txn({ compare: [], success: [{ type: 'put', key: key(n % 500), value: `v2:${n}` }, { type: 'put', key: key(1000 + n), value: 'new' }] })
      commits.push(performance.now())
    }
  })()
  return { commits, stop: async () => ((running = false), await loop) }
}

t.test('a paged read sees one revision while writes go on', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const [reader, writer] = [await cluster.client(t), await cluster.client(t)]
  await putAll(writer, 0, 500, 'v1')
  const writes = writeMeanwhile(writer)
  await new Promise((resolve) => setTimeout(resolve, 50))
  const startedAt = performance.now()
  const paged = await readPrefix(reader, PREFIX, { pageSize: 20 })
  const endedAt = performance.now()
  await writes.stop()
  t.ok(writes.commits.some((at) => at > startedAt && at < endedAt), 'writes committed while the pages were read')

  const whole = await reader.range({ key: PREFIX, rangeEnd: prefixRangeEnd(PREFIX), revision: paged.revision })
  t.equal(paged.entries.length, whole.kvs.length, `${paged.entries.length} entries, as many as one read at revision ${paged.revision}`)
  t.same(
    paged.entries.map((kv) => [kv.key, kv.modRevision]),
    whole.kvs.map((kv) => [kv.key, kv.modRevision]),
    'the same keys at the same versions, in key order',
  )
  t.ok(paged.entries.every((kv) => BigInt(kv.modRevision) <= BigInt(paged.revision)), 'nothing newer than the snapshot revision')
  const now = await reader.range({ key: PREFIX, rangeEnd: prefixRangeEnd(PREFIX), limit: 1 })
  t.ok(BigInt(now.revision) > BigInt(paged.revision), 'while etcd moved on')
})

t.test('an entry larger than the limits allow is refused, not read into a page that could overflow', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const client = await cluster.client(t)
  await client.txn({ compare: [], success: [{ type: 'put', key: `${PREFIX}small`, value: 'ok' }, { type: 'put', key: `${PREFIX}zbig`, value: Buffer.alloc(100 * 1024) }] })
  await t.rejects(readPrefix(client, PREFIX), { name: 'EtcdLimitError', code: 'entry_too_large' })
  const roomy = await readPrefix(client, PREFIX, { limits: { ...DEFAULT_ETCD_LIMITS, maxEntryBytes: 256 * 1024 } })
  t.equal(roomy.entries.length, 2, 'with a larger entry limit (and smaller pages) it reads')
  t.same((await readPrefix(client, '/pxe-paged/empty/')).entries, [], 'an empty prefix reads as empty')
})

t.test("a page may be larger than gRPC's default 4 MiB: 10,000 node records load in a few round trips", needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const client = await cluster.client(t)
  const big = '/pxe-paged/big/'
  // 80 entries of 60 KiB: 4.8 MB, over gRPC's default receive limit, within ours
  for (let start = 0; start < 80; start += 20) {
    await client.txn({ compare: [], success: Array.from({ length: 20 }, (_, i) => ({ type: 'put' as const, key: `${big}${String(start + i).padStart(2, '0')}`, value: Buffer.alloc(60 * 1024, start + i) })) })
  }
  let ranges = 0
  const counting: EtcdClient = Object.create(client) as EtcdClient
  counting.range = (request, timeoutMs) => ((ranges += 1), client.range(request, timeoutMs))
  const read = await readPrefix(counting, big)
  t.equal(read.entries.length, 80)
  t.equal(ranges, 1, 'all 4.8 MB in one page')
  t.ok(read.entries.every((kv, i) => kv.value.length === 60 * 1024 && kv.value[0] === i), 'every value whole')
})
