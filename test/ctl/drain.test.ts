// pxe-ctl drain / undrain against a real controller: a live node, a name that is not live (refused
// without --force, nothing changed), --dry-run against what the real drain then does under both
// planners, and --wait until the node's shards are released, or its timeout.
import t from 'tap'
import { startFleet, until, type Fleet } from './support.js'

/** Owner per shard of a GET /v1/plan answer. */
function owners(plan: any): (string | null)[] {
  const out: (string | null)[] = new Array(plan.total_shards).fill(null)
  for (const n of plan.nodes) for (let s = n.range_start; s < n.range_start + n.range_count; s++) out[s] = n.node_id
  return out
}

/** What really moved between two plans: count, and per new owner. */
function moves(before: any, after: any): { moved: number; to: Record<string, number>; to_unassigned: number } {
  const a = owners(before)
  const b = owners(after)
  const to: Record<string, number> = {}
  let moved = 0
  let toUnassigned = 0
  a.forEach((owner, s) => {
    if (owner === null || owner === b[s]) return
    moved += 1
    if (b[s] !== null) to[b[s]!] = (to[b[s]!] ?? 0) + 1
    else toUnassigned += 1
  })
  return { moved, to, to_unassigned: toUnassigned }
}

async function checkInAll(fleet: Fleet, caps: Record<string, number>): Promise<void> {
  for (const [name, capacity] of Object.entries(caps)) await fleet.checkIn(name, { capacity })
  const generation = (await fleet.plan()).generation
  for (const [name, capacity] of Object.entries(caps)) await fleet.checkIn(name, { capacity, generation })
}

t.test('drain and undrain a live node; a name that is not live needs --force', async (t) => {
  const fleet = await startFleet(t)
  await checkInAll(fleet, { a: 16, b: 16, c: 16 })
  const res = await fleet.ctl('drain', 'b')
  t.equal(res.code, 0, res.stderr)
  const plan = await fleet.plan()
  t.equal(res.stdout, `b is draining (plan generation ${plan.generation})\n`)
  t.equal(plan.nodes.find((n: any) => n.node_id === 'b').draining, true)
  t.equal(plan.nodes.find((n: any) => n.node_id === 'b').range_count, 0)

  const json = await fleet.ctl('drain', 'b', '-o', 'json')
  t.equal(json.code, 0, json.stderr)
  t.match(JSON.parse(json.stdout), { node_id: 'b', draining: true, generation: plan.generation }, 'a drain again changes nothing')

  const undrained = await fleet.ctl('undrain', 'b')
  t.equal(undrained.code, 0, undrained.stderr)
  const after = await fleet.plan()
  t.equal(undrained.stdout, `b is no longer draining (plan generation ${after.generation})\n`)
  t.equal(after.nodes.find((n: any) => n.node_id === 'b').draining, false)

  const refused = await fleet.ctl('drain', 'ghost-01')
  t.equal(refused.code, 1)
  t.match(refused.stderr, 'ghost-01 is not live (no check-in within the lease); the flag would be kept for when it joins')
  t.match(refused.stderr, /pass --force/)
  t.equal(refused.stdout, '')
  t.equal((await fleet.plan()).generation, after.generation, 'nothing changed')
  await fleet.checkIn('ghost-01', { capacity: 16 })
  t.equal((await fleet.plan()).nodes.find((n: any) => n.node_id === 'ghost-01').draining, false, 'no flag was set')

  const forced = await fleet.ctl('drain', 'ghost-02', '--force', '-o', 'json')
  t.equal(forced.code, 0, forced.stderr)
  t.match(forced.stderr, /warning: ghost-02 is not live/)
  const answer = JSON.parse(forced.stdout)
  t.match(answer, { node_id: 'ghost-02', draining: true })
  if ('live' in answer) t.equal(answer.live, false, 'the answer says it is not live')
  await fleet.checkIn('ghost-02', { capacity: 16 })
  const joined = (await fleet.plan()).nodes.find((n: any) => n.node_id === 'ghost-02')
  t.match(joined, { draining: true, range_count: 0 }, 'the flag was kept for when it joined')

  const stray = await fleet.ctl('undrain', 'ghost-03')
  t.equal(stray.code, 1, 'undrain of a name neither live nor flagged needs --force')
  t.match(stray.stderr, /ghost-03 is not live.*nothing to undrain/)

  for (const args of [['drain'], ['drain', '-bad'], ['drain', 'a b'], ['drain', 'b', '--dry-run', '--wait'], ['drain', 'b', '--timeout', '5'], ['drain', 'b', '--wait', '--timeout', 'soon'], ['drain', 'b', '--wiat'], ['undrain'], ['drain', 'b', 'c']]) {
    const res = await fleet.ctl(...args)
    t.equal(res.code, 2, `${args.join(' ')}: a usage error`)
    t.match(res.stderr, /usage: pxe-ctl (un)?drain NODE/, `${args.join(' ')}: prints the usage`)
  }
})

for (const planner of ['contiguous', 'stable'] as const) {
  t.test(`drain --dry-run predicts what the real drain moves (${planner} planner) and changes nothing`, async (t) => {
    const fleet = await startFleet(t, { planner, total_shards: 60, max_concurrency: 1 })
    // A history, so that the stable planner's ranges are not the contiguous layout.
    await checkInAll(fleet, { b: 24, d: 16 })
    await checkInAll(fleet, { a: 16, b: 24, c: 8, d: 16, e: 12 })
    // TODO(merge main): every controller reports "planner" then; a dry run of one that does not assumes contiguous.
    if ((await fleet.plan()).planner === undefined && planner === 'stable') return void t.pass('skipped: this controller does not report its planner yet')
    for (const target of ['b', 'd']) {
      const before = await fleet.plan()
      const dry = await fleet.ctl('drain', target, '--dry-run', '-o', 'json')
      t.equal(dry.code, 0, dry.stderr)
      const predicted = JSON.parse(dry.stdout)
      t.equal((await fleet.plan()).generation, before.generation, 'the dry run changed nothing')
      t.equal(predicted.node_id, target)
      if (before.planner !== undefined) t.equal(predicted.planner, planner, 'the planner the plan names')
      const text = await fleet.ctl('drain', target, '--dry-run')
      t.equal(text.code, 0, text.stderr)
      const real = await fleet.ctl('drain', target)
      t.equal(real.code, 0, real.stderr)
      const actual = moves(before, await fleet.plan())
      t.ok(actual.moved > 0, `${target}: shards moved`)
      t.same({ moved: predicted.moved, to: predicted.to, to_unassigned: predicted.to_unassigned }, actual, `${target}: predicted = what the controller did`)
      const targets = Object.entries(actual.to).sort(([x], [y]) => (x < y ? -1 : 1))
      const unassigned = actual.to_unassigned > 0 ? [`${actual.to_unassigned} to no node (unassigned: no capacity left)`] : []
      t.equal(text.stdout.split('\n')[0], `${actual.moved} shards would move: ${[...targets.map(([n, k]) => `${k} to ${n}`), ...unassigned].join(', ')}`)
      await checkInAll(fleet, { a: 16, b: 24, c: 8, d: 16, e: 12 })
    }
    const again = await fleet.ctl('drain', 'b', '--dry-run')
    t.match(again.stdout, /^0 shards would move/, 'a node already draining: nothing moves')
  })
}

t.test('drain --wait returns once the node released its shards; --timeout gives up with what is held', async (t) => {
  const fleet = await startFleet(t, { total_shards: 16, max_concurrency: 1 })
  await checkInAll(fleet, { a: 8, b: 8, c: 8 })
  const run = fleet.spawn('drain', 'b', '--wait', '--timeout', '30')
  await until('the drain', () => /b is draining \(plan generation \d+\)/.test(run.output().stdout))
  await until('a progress line', () => /waiting for b: it /.test(run.output().stderr))
  t.notOk(run.child.exitCode !== null, 'still waiting while b has not released')
  // b's agent would now stop its shards and report the new plan: that releases the handoffs.
  let answer = await fleet.checkIn('b', { capacity: 8 })
  answer = await fleet.checkIn('b', { capacity: 8, generation: answer.generation })
  const res = await run.done
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, /^b holds no shard and its handoffs are released \(after \d+s\)$/m)
  t.equal(answer.range_count, 0)

  const started = Date.now()
  const timedOut = await fleet.ctl('drain', 'c', '--wait', '--timeout', '1.5')
  t.equal(timedOut.code, 1)
  t.match(timedOut.stderr, /pxe-ctl: error: timed out after 1\.5 s: c (has not yet reported generation \d+|.*handoffs? wait)/)
  t.match(timedOut.stderr, /it stays flagged for drain/)
  t.ok(Date.now() - started < 15_000, 'gave up at its timeout')
  t.equal((await fleet.plan()).nodes.find((n: any) => n.node_id === 'c').draining, true)

  const json = fleet.spawn('drain', 'a', '--wait', '-o', 'json')
  await until('the drain of a', async () => (await fleet.plan()).nodes.find((n: any) => n.node_id === 'a').draining)
  const ack = await fleet.checkIn('a', { capacity: 8 })
  await fleet.checkIn('a', { capacity: 8, generation: ack.generation })
  const out = await json.done
  t.equal(out.code, 0, out.stderr)
  t.match(JSON.parse(out.stdout), { node_id: 'a', draining: true, released: true })
})
