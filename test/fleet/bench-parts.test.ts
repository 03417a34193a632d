// Pure parts of the fleet benchmark: the profile summary's windows and categories, the source addresses,
// the options, phase d's choice of nodes and count of moves, and a light node's shard book.
import t from 'tap'
import { BenchUsageError, parseBenchArgs } from '../../bench/fleet/scale/bench-options.js'
import { changedOwners, drainedNodes, rangeFill } from '../../bench/fleet/scale/drain-phase.js'
import { handshakeQuantiles, sourceAddress } from '../../bench/fleet/scale/fleet-bench.js'
import { LAG_BUCKET_MS, answerBucket, medianOfBuckets, tally } from '../../bench/fleet/scale/load-protocol.js'
import { summarizeProfile } from '../../bench/fleet/scale/profile-summary.js'
import { joinBreakdown } from '../../bench/fleet/scale/ceiling-costs.js'
import { BENCH_RESUME_URL, IDENTIFY_INTERVAL_MS, ShardBook } from '../../bench/fleet/scale/shard-book.js'
import { takeFrame } from '../../bench/http-frames.js'

t.test('a profile is summarized by self time within a window, by category and by function', async (t) => {
  const frame = (id: number, functionName: string, url: string) => ({ id, callFrame: { functionName, url, lineNumber: 9, scriptId: '1', columnNumber: 0 } })
  const profile = {
    nodes: [frame(1, '(idle)', ''), frame(2, 'writeState', 'file:///x/dist/src/state/journaled-file-store.js'), frame(3, '(garbage collector)', ''), frame(4, 'sign', 'file:///x/node_modules/jose/dist/webapi/lib/jws_sign.js')],
    startTime: 1_000_000, // µs: 1000 ms on the shared clock
    endTime: 1_100_000,
    // Samples every 10 ms: state, state, gc, jose, idle, state (the last has no duration after it).
    samples: [2, 2, 3, 4, 1, 2],
    timeDeltas: [0, 10_000, 10_000, 10_000, 10_000, 10_000],
  }
  const all = summarizeProfile(profile, null, null)
  t.equal(all.totalMs, 50)
  t.same(Object.fromEntries(all.byCategory), { 'state writes': 20, 'garbage collection': 10, 'plan signing (jose)': 10, idle: 10 })
  t.same(all.topFunctions[0], ['writeState src/state/journaled-file-store.js:10', 20])
  const window = summarizeProfile(profile, 1015, 1035)
  t.same(Object.fromEntries(window.byCategory), { 'garbage collection': 10, 'plan signing (jose)': 10 }, 'only the samples at 1020 and 1030 ms')
  t.throws(() => summarizeProfile({ nodes: 'nope' }, null, null), 'not a profile')
})

t.test('loopback source addresses: one per node by default, or shared by up to 64 (under the default cap)', async (t) => {
  t.equal(sourceAddress(0, 1), '127.1.0.1')
  t.equal(sourceAddress(249, 1), '127.1.0.250')
  t.equal(sourceAddress(250, 1), '127.1.1.1')
  t.equal(sourceAddress(62_499, 1), '127.1.249.250')
  t.equal(sourceAddress(62_500, 1), '127.2.0.1', 'past 62,500 addresses the next /16')
  const ones = new Set(Array.from({ length: 60_000 }, (_, i) => sourceAddress(i, 1)))
  t.equal(ones.size, 60_000, 'every node of the largest fleet has its own address')
  t.equal(sourceAddress(49, 50), '127.1.0.1')
  t.equal(sourceAddress(50, 50), '127.1.0.2')
  t.equal(sourceAddress(9999, 50), '127.1.0.200')
  const counts = new Map<string, number>()
  for (let i = 0; i < 10_000; i++) counts.set(sourceAddress(i, 64), (counts.get(sourceAddress(i, 64)) ?? 0) + 1)
  t.equal(Math.max(...counts.values()), 64)
})

t.test('the load generators read one answer at a time off the raw socket bytes', async (t) => {
  const answer = (body: string) => `HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
  const two = Buffer.from(answer('{"a":1}') + answer('{}'), 'latin1')
  const first = takeFrame(two)
  if (first === null || first instanceof Error) throw new Error('a complete answer was not read')
  t.equal(first.status, 429)
  t.equal(first.body.toString(), '{"a":1}')
  const second = takeFrame(first.rest)
  t.match(second, { status: 429 }, 'the bytes after the first answer start the next')
  t.equal(takeFrame(two.subarray(0, 20)), null, 'an incomplete head waits for more bytes')
  t.equal(takeFrame(two.subarray(0, first.body.byteOffset - two.byteOffset + 3)), null, 'an incomplete body waits too')
  const bad = takeFrame(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', 'latin1'))
  t.match(bad, Error, 'an answer without Content-Length is an error')
})

t.test('bench:fleet options: --planner and --drain (1 % of the fleet by default, at least 1; 0 skips phase d)', async (t) => {
  t.match(parseBenchArgs([]), { planner: 'contiguous', drain: 100, nodes: 10_000 })
  t.match(parseBenchArgs(['--nodes', '1000', '--shards', '16384', '--capacity', '32']), { drain: 10 })
  t.match(parseBenchArgs(['--nodes', '40']), { drain: 1 }, 'at least one node')
  t.match(parseBenchArgs(['--nodes', '40', '--drain', '0', '--planner', 'stable']), { drain: 0, planner: 'stable' })
  t.match(parseBenchArgs(['--drain', '7']), { drain: 7 })
  t.throws(() => parseBenchArgs(['--planner', 'random']), BenchUsageError)
  t.throws(() => parseBenchArgs(['--nodes', '5', '--drain', '5']), /leave at least one node/)
  t.throws(() => parseBenchArgs(['--drain', '-1']), BenchUsageError)
  t.throws(() => parseBenchArgs(['--drain', '1.5']), BenchUsageError)
  t.equal(parseBenchArgs(['--help']), null)
})

t.test('bench:fleet options: --controller-node-args takes node flags only', async (t) => {
  t.same(parseBenchArgs([])!['controller-node-args'], [], 'none by default')
  t.same(parseBenchArgs(['--controller-node-args=--trace-gc  --max-semi-space-size=32'])!['controller-node-args'], ['--trace-gc', '--max-semi-space-size=32'])
  for (const bad of ['trace-gc', '--trace-gc ./evil.js', '-e', '--require=x y']) t.throws(() => parseBenchArgs([`--controller-node-args=${bad}`]), /--controller-node-args: each argument must be a node or V8 flag/, JSON.stringify(bad))
})

t.test('phase d drains nodes spread over the fleet and counts shards that changed owner', async (t) => {
  const names = Array.from({ length: 10 }, (_, i) => `n${i}`)
  t.same(drainedNodes(names, 1), ['n5'])
  t.same(drainedNodes(names, 2), ['n2', 'n7'])
  t.equal(new Set(drainedNodes(names, 10)).size, 10)
  const plan = (nodes: [string, number, number][]) => ({ generation: 1, total_shards: 8, unassigned: 0, nodes: nodes.map(([node_id, range_start, range_count]) => ({ node_id, capacity: 8, draining: false, range_start, range_count })) })
  t.equal(changedOwners(plan([['a', 0, 4], ['b', 4, 4]]), plan([['a', 0, 5], ['b', 5, 3]])), 1)
  t.equal(changedOwners(plan([['a', 0, 4], ['b', 4, 4]]), plan([['a', 0, 0], ['b', 0, 8]])), 4)
  t.same(rangeFill(plan([['a', 0, 8], ['b', 8, 0]])), { full: 1, minCount: 0, maxCount: 8 })
})

t.test("a light node's shard book: stops what a plan takes away (its session to deposit), claims what it adds", async (t) => {
  const book = new ShardBook('n1')
  book.begin(0, 4)
  t.equal(book.runningCount, 4)
  t.equal(book.applyPlan(2, 4), 2, 'shards 0 and 1 stop')
  const deposits = book.pendingDeposits()
  t.same(deposits.map((d) => d.shard_id), [0, 1])
  t.match(deposits[0], { session_id: /^b0nn1k\d+$/, sequence: 1, resume_url: BENCH_RESUME_URL })
  t.equal(book.missing(2, 4), 2, 'shards 4 and 5 are wanted')
  t.same(book.nextClaim(100, 16), { shard: 4 })
  book.waitHandoff(4, 100, 25_000)
  t.same(book.nextClaim(100, 16), { shard: 5 }, 'a handoff wait holds that shard only')
  t.ok(book.granted(5, 100, 16, { session_id: 'b5nn0k3', sequence: 40 }), "a resume of this shard's session")
  t.notOk(book.granted(4, 1200, 16, { session_id: 'b1nn0k3', sequence: 1 }), "another shard's session is noticed")
  t.equal(book.missing(2, 4), 0)
  book.depositsDone(deposits)
  t.equal(book.depositCount, 0)
  // An Identify grant holds its bucket for the Identify interval; a resume does not.
  book.applyPlan(2, 40)
  t.ok(book.granted(6, 2000, 16, null))
  const next = book.nextClaim(2000, 16)
  t.same(next, { shard: 7 })
  t.equal(book.applyPlan(6, 17), 4, 'a range of 6..22 stops 2..5')
  for (let s = 7; s < 22; s++) book.granted(s, 2000, 16, { session_id: `b${s}nx`, sequence: 1 })
  t.same(book.nextClaim(2000, 16), { at: 2000 + IDENTIFY_INTERVAL_MS }, "shard 22 waits for bucket 6's Identify interval")
  t.equal(book.applyPlan(6, 1), 15, 'a plan that keeps only shard 6 stops 7..21')
  t.equal(book.pendingDeposits().length, 19, 'every stopped session waits for the release check-in')
})

t.test('bench:fleet --repeat and --no-ceiling; the medians of several runs', async (t) => {
  t.match(parseBenchArgs([]), { repeat: 1, 'no-ceiling': false })
  t.match(parseBenchArgs(['--repeat', '3', '--no-ceiling']), { repeat: 3, 'no-ceiling': true })
  for (const bad of ['0', '10', '1.5', 'x']) t.throws(() => parseBenchArgs(['--repeat', bad]), BenchUsageError, bad)
  const { median } = await import('../../bench/fleet/scale/medians.js')
  t.equal(median([3, 1, 2]), 2)
  t.equal(median([4, 1, 3, 2]), 2.5)
  t.equal(median([null, 5, null]), 5, 'unknown figures (a phase that did not finish) are left out')
  t.equal(median([null]), null)
})

t.test('bench:fleet --ha, --ha-etcd FILE and --ha-ttl', async (t) => {
  t.match(parseBenchArgs([]), { ha: false, 'ha-ttl': 5 })
  t.match(parseBenchArgs(['--ha', '--ha-ttl', '10']), { ha: true, 'ha-ttl': 10 })
  t.throws(() => parseBenchArgs(['--ha-etcd', 'x.json']), /--ha-etcd needs --ha/)
  t.throws(() => parseBenchArgs(['--ha-ttl', '10']), /--ha-ttl needs --ha/)
  t.throws(() => parseBenchArgs(['--ha', '--ha-ttl', '1']), /ha-ttl/, 'below etcd’s minimum')
  t.match(parseBenchArgs(['--cpu-prof-join', 'prof']), { 'cpu-prof-join': 'prof', ha: false })
  t.throws(() => parseBenchArgs(['--ha', '--cpu-prof-join', 'prof']), /--cpu-prof-join does not go with --ha/, 'a take-over kills with -9: no profile')
  const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const { join } = await import('node:path')
  const { readHaEtcdFile } = await import('../../bench/fleet/scale/ha-side.js')
  const dir = mkdtempSync(join(tmpdir(), 'pxe-ha-etcd-file-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'etcd.json')
  writeFileSync(file, JSON.stringify({ endpoints: ['https://127.0.0.1:2379'], ca: 'ca.pem', cert: 'c.pem', key: 'k.pem', server_name: 'etcd.local' }))
  t.same(await readHaEtcdFile(file), { connection: { endpoints: ['https://127.0.0.1:2379'], ca: join(dir, 'ca.pem'), cert: join(dir, 'c.pem'), key: join(dir, 'k.pem'), serverName: 'etcd.local' }, maxTxnOps: 128 }, 'paths relative to the file; etcd\'s default --max-txn-ops')
  writeFileSync(file, JSON.stringify({ endpoints: ['https://127.0.0.1:2379'], ca: 'ca.pem', cert: 'c.pem', key: 'k.pem', max_txn_ops: 4096 }))
  t.equal((await readHaEtcdFile(file)).maxTxnOps, 4096, 'max_txn_ops: the members\' --max-txn-ops')
  writeFileSync(file, JSON.stringify({ endpoints: ['https://127.0.0.1:2379'], ca: 'ca.pem', cert: 'c.pem', key: 'k.pem', max_txn_ops: 4 }))
  await t.rejects(readHaEtcdFile(file), /--ha-etcd .*max_txn_ops/)
  writeFileSync(file, JSON.stringify({ endpoints: ['http://127.0.0.1:2379'], ca: 'ca.pem', cert: 'c.pem', key: 'k.pem' }))
  await t.rejects(readHaEtcdFile(file), /--ha-etcd .*endpoints\.0: must be an https:\/\/host:port URL/)
  writeFileSync(file, JSON.stringify({ endpoints: ['https://127.0.0.1:2379'], ca: 'ca.pem', cert: 'c.pem', key: 'k.pem', password: 'x' }))
  await t.rejects(readHaEtcdFile(file), /Unrecognized key/)
  writeFileSync(file, '{"endpoints": [')
  await t.rejects(readHaEtcdFile(file), /--ha-etcd .*JSON/)
})

t.test('the answered attempts after a kill: medians of quarter-second buckets added up over the load generators', async (t) => {
  t.equal(medianOfBuckets({}), null, 'no nodes: no median')
  t.equal(medianOfBuckets({ '1000': 1 }), 1125, 'one node: the middle of its bucket')
  // Two generators: 3 nodes began 0.5-0.75 s before their fail-safe, 1 node 2 s before, 1 node 0.25 s after it.
  const merged = tally([{ '500': 2, '-250': 1 }, { '500': 1, '2000': 1 }])
  t.same(merged, { '500': 3, '-250': 1, '2000': 1 })
  t.equal(medianOfBuckets(merged), 625, 'buckets ordered by number, not as strings ("-250" < "500" < "2000")')
  t.equal(medianOfBuckets({ '-500': 3, '250': 1 }), -375, 'a negative median: began after the fail-safe moment')
  t.same([answerBucket(0), answerBucket(249), answerBucket(250), answerBucket(-1), answerBucket(-250), answerBucket(-251)], ['0', '0', '250', '-250', '-250', '-500'], 'buckets start at multiples of 250 ms, below zero too')
  t.same([answerBucket(7, LAG_BUCKET_MS), answerBucket(1234, LAG_BUCKET_MS)], ['0', '1230'], 'timer lags in 10 ms buckets')
  t.equal(medianOfBuckets({ '0': 3, '1230': 1 }, LAG_BUCKET_MS), 5, 'no lag to speak of reads as 5 ms, not 125')
})

t.test("the controller's handshakes over a phase: histogram buckets read twice, the bounds its median and 90th percentile fall under", async (t) => {
  const reading = (counts: number[]) => new Map([0.1, 0.5, 1, 5, Infinity].map((le, i) => [le, counts[i]!]))
  const before = reading([10, 20, 20, 20, 20])
  // 100 more: 10 under 0.1 s, 30 more under 0.5 s, 40 more under 1 s, 20 more under 5 s
  const after = reading([20, 60, 100, 120, 120])
  t.same(handshakeQuantiles(before, after), { count: 100, p50: 1, p90: 5 })
  t.same(handshakeQuantiles(null, after), { count: 120, p50: 0.5, p90: 5 }, 'no reading before: everything counts')
  t.equal(handshakeQuantiles(before, null), null, 'no reading after: unknown')
  t.same(handshakeQuantiles(null, reading([0, 0, 0, 0, 0])), { count: 0, p50: 0.1, p90: 0.1 }, 'none: the first bound, with a count of 0 that says so')
})

t.test("the cold join's CPU is taken apart: renewals at the steady cost, the joins against the ceiling", async (t) => {
  const parts = joinBreakdown({
    controllerCpuS: 33,
    replanS: 0.5,
    checkins: 33_000,
    handshakes: 10_000,
    steadyCpuPerS: 0.44,
    steadyCheckinsPerS: 1_000,
    ceiling: { fullMs: 1.5, resumedMs: 0.75, renewalMs: 0.25 },
  })
  t.ok(parts)
  t.equal(parts!.renewals, 23_000, 'check-ins less handshakes: those on connections already open')
  t.ok(Math.abs(parts!.steadyMsPerCheckin - 0.44) < 1e-9)
  t.ok(Math.abs(parts!.renewalsS - 10.12) < 1e-9, '23,000 at 0.44 ms')
  t.ok(Math.abs(parts!.joinsS - (33 - 0.5 - 10.12)) < 1e-9, 'the rest, less the re-plans')
  t.ok(Math.abs(parts!.ratio! - (33 - 0.5 - 10.12) / 15) < 1e-9, 'against 10,000 full connections at the ceiling')
  t.ok(Math.abs(parts!.atCeilingS! - (15 + 23_000 * 0.25 / 1000)) < 1e-9, 'the whole phase at the ceiling: its connections full, its renewals at the paced cost')
  t.ok(Math.abs(parts!.ceilingOwnRatio! - 20.75 / 15) < 1e-9, 'what the ceiling itself would read on the measure')
  t.ok(Math.abs(parts!.vsCeilingPhase! - 32.5 / 20.75) < 1e-9, 'the phase less re-plans against the ceiling doing the same')
  t.equal(joinBreakdown({ controllerCpuS: 1, replanS: null, checkins: 5, handshakes: 10, steadyCpuPerS: 0.4, steadyCheckinsPerS: 1_000, ceiling: null })!.renewals, 0, 'never negative')
  t.equal(joinBreakdown({ controllerCpuS: 1, replanS: null, checkins: 5, handshakes: 10, steadyCpuPerS: 0.4, steadyCheckinsPerS: 1_000, ceiling: null })!.ratio, null, 'no ceiling, no ratio')
  t.equal(joinBreakdown({ controllerCpuS: 1, replanS: null, checkins: 5, handshakes: 10, steadyCpuPerS: 0, steadyCheckinsPerS: 0, ceiling: null }), null, 'no steady window measured: nothing to price with')
})
