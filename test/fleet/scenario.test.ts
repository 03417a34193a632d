// The fleet simulator's flags and its seeded scenario.
import t from 'tap'
import { parseFleetArgs, UsageError } from '../../bench/fleet/options.js'
import { buildScenario } from '../../bench/fleet/scenario.js'

t.test('flags: defaults, derived values, and clear refusals', async (t) => {
  const o = parseFleetArgs(['--nodes', '40', '--shards', '64', '--seed', '9'])!
  t.match(o, { nodes: 40, shards: 64, maxConcurrency: 16, leaseS: 8, identifyIntervalMs: 5100, seed: 9, dailyLimit: 640 })
  t.match(o.churn, { joins: 2, leaves: 2, drains: 2, pauses: 1, restarts: 1, revocations: 1, reshards: 0, partitions: 1 })
  t.match(o, { reshardTo: 128, slowStopMs: 1000 }, 'a reshard doubles; a slow stop takes 3/4 of the default stop timeout (lease/6)')
  t.equal(parseFleetArgs(['--shards', '65536', '--max-concurrency', '16'])!.reshardTo, 32_768, 'halved at the limit')
  t.equal(parseFleetArgs(['--help']), null)
  const refused = (args: string[], message: RegExp) => t.throws(() => parseFleetArgs(args), { name: UsageError.name, message })
  refused(['--shards', '100', '--max-concurrency', '16'], /multiple of --max-concurrency/)
  refused(['--identify-interval-ms', '4999'], /--identify-interval-ms/)
  refused(['--nodes', '5', '--joins', '2', '--leaves', '2'], /must leave at least 2/)
  refused(['--shards', '64', '--reshard-to', '40'], /--reshard-to \(40\) must be a multiple/)
  refused(['--shards', '64', '--reshard-to', '64'], /must differ/)
  refused(['--nodes', 'many'], /--nodes/)
  refused(['--bogus'], /bogus/)
  t.match(o, { gateway: 'none' }, 'the recording callbacks by default')
})

t.test('--gateway discordjs: a 5.5 s identify interval by default and at least; the event rate only with it', async (t) => {
  t.match(parseFleetArgs(['--gateway', 'discordjs'])!, { gateway: 'discordjs', identifyIntervalMs: 5500, gatewayEventsPerSecond: 2 })
  t.match(parseFleetArgs(['--gateway', 'discordjs', '--identify-interval-ms', '6000', '--gateway-events-per-second', '5'])!, { identifyIntervalMs: 6000, gatewayEventsPerSecond: 5 })
  const refused = (args: string[], message: RegExp) => t.throws(() => parseFleetArgs(args), { name: UsageError.name, message })
  refused(['--gateway', 'discordjs', '--identify-interval-ms', '5100'], /must be >= 5500 with --gateway discordjs/)
  refused(['--gateway-events-per-second', '5'], /needs --gateway discordjs/)
  refused(['--gateway', 'eris'], /--gateway/)
})

t.test('the scenario follows the seed; each role has its own nodes; a paused or partitioned node has a process of its own', async (t) => {
  const opts = parseFleetArgs(['--nodes', '50', '--shards', '64', '--seed', '42', '--duration', '30', '--per-process', '20', '--reshards', '3'])!
  const a = buildScenario(opts)
  t.same(buildScenario(opts), a, 'the same seed gives the same scenario')
  t.not(JSON.stringify(buildScenario({ ...opts, seed: 43 }).events), JSON.stringify(a.events), 'another seed another schedule')
  const events = a.events
  t.ok(events.every((e, i) => i === 0 || events[i - 1]!.at <= e.at), 'sorted by time')
  t.ok(events.every((e) => e.at >= 0 && e.at <= 30_000), 'within the churn phase')
  const targets = (kind: string) => events.filter((e) => e.kind === kind).map((e) => ('node' in e ? e.node : ''))
  const single = [...targets('join'), ...targets('leave'), ...targets('revoke'), ...targets('pause'), ...targets('partition')]
  t.equal(new Set(single).size, single.length, 'joins, leaves, revocations, pauses and partitions never share a node')
  for (const node of targets('join')) t.equal(a.nodes.find((n) => n.name === node)!.initial, false, 'a joiner starts late')
  const paused = a.nodes.find((n) => n.name === targets('pause')[0])!
  t.equal(a.nodes.filter((n) => n.process === paused.process).length, 1, 'a frozen process holds only the paused node')
  const cut = a.nodes.find((n) => n.name === targets('partition')[0])!
  t.equal(a.nodes.filter((n) => n.process === cut.process).length, 1, 'a partitioned process holds only its node')
  t.same(a.partitionProcesses, [cut.process], 'and it is the one with the proxy and the slow stops')
  t.equal(a.processes, 2 + Math.ceil(48 / 20))
  const reshards = events.filter((e) => e.kind === 'reshard')
  t.same(reshards.map((e) => e.kind === 'reshard' && e.totalShards), [128, 64, 128], 'reshards alternate between the two counts, in time order')
  t.ok(reshards.some((e) => e.at === 30_000), 'the first at the end of the churn')
  const partition = events.find((e) => e.kind === 'partition')!
  t.ok(partition.kind === 'partition' && partition.forMs > opts.leaseS * 1000, 'a partition outlasts the lease')
  t.ok(a.nodes.every((n) => n.capacity >= Math.ceil(128 / 50)), 'capacities are made for the larger count')
  const pause = events.find((e) => e.kind === 'pause')!
  t.ok(pause.kind === 'pause' && pause.forMs > opts.leaseS * 1000, 'a pause outlasts the lease')
  const drains = events.filter((e) => e.kind === 'drain')
  t.equal(drains.filter((e) => e.kind === 'drain' && e.draining).length, drains.filter((e) => e.kind === 'drain' && !e.draining).length, 'every drain is lifted')
})
