// pxe-ctl drain / undrain against a real controller: a live node, a name that is not live (refused
// without --force, nothing changed), and --wait until the node's shards are released, or its timeout.
// (--dry-run: drain-dry-run.test.ts; a drain that would leave shards without a node: drain-capacity.test.ts.)
import t from 'tap'
import { startFleet, until, type Fleet } from './support.js'

async function checkInAll(fleet: Fleet, caps: Record<string, number>): Promise<void> {
  for (const [name, capacity] of Object.entries(caps)) await fleet.checkIn(name, { capacity })
  const generation = (await fleet.plan()).generation
  for (const [name, capacity] of Object.entries(caps)) await fleet.checkIn(name, { capacity, generation })
}

t.test('drain and undrain a live node; a name that is not live needs --force', async (t) => {
  // 32 shards: a and c can take b's (a drain that would strand shards: drain-capacity.test.ts)
  const fleet = await startFleet(t, { total_shards: 32, max_concurrency: 16 })
  await checkInAll(fleet, { a: 16, b: 16, c: 16 })
  const res = await fleet.ctl('drain', 'b')
  t.equal(res.code, 0, res.stderr)
  const plan = await fleet.plan()
  t.equal(res.stdout, `b is draining (plan generation ${plan.generation})\n`)
  t.equal(plan.nodes.find((n: any) => n.node_id === 'b').draining, true)
  t.equal(plan.nodes.find((n: any) => n.node_id === 'b').range_count, 0)

  const json = await fleet.ctl('drain', 'b', '-o', 'json')
  t.equal(json.code, 0, json.stderr)
  t.same(JSON.parse(json.stdout), { node_id: 'b', draining: true, generation: plan.generation, live: true, unassigned: 0 }, 'a drain again changes nothing')

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
  t.equal(answer.live, false, 'the answer says it is not live')
  t.same((await fleet.plan()).drain_flags_not_live, ['ghost-02'])
  await fleet.checkIn('ghost-02', { capacity: 16 })
  const joined = (await fleet.plan()).nodes.find((n: any) => n.node_id === 'ghost-02')
  t.match(joined, { draining: true, range_count: 0 }, 'the flag was kept for when it joined')

  t.equal((await fleet.ctl('drain', 'ghost-04', '--force')).code, 0)
  const cleared = await fleet.ctl('undrain', 'ghost-04')
  t.equal(cleared.code, 0, `a stale flag of a name that is not live is cleared without --force: ${cleared.stderr}`)
  t.match(cleared.stdout, 'ghost-04 is no longer draining (plan generation')
  t.match(cleared.stdout, '(it is not live: its stale flag is cleared)')
  t.notOk((await fleet.plan()).drain_flags_not_live.includes('ghost-04'))

  const stray = await fleet.ctl('undrain', 'ghost-03')
  t.equal(stray.code, 1, 'undrain of a name neither live nor flagged needs --force')
  t.match(stray.stderr, /ghost-03 is not live.*nothing to undrain/)

  for (const args of [['drain'], ['drain', '-bad'], ['drain', 'a b'], ['drain', 'b', '--dry-run', '--wait'], ['drain', 'b', '--timeout', '5'], ['drain', 'b', '--wait', '--timeout', 'soon'], ['drain', 'b', '--wiat'], ['undrain'], ['drain', 'b', 'c']]) {
    const res = await fleet.ctl(...args)
    t.equal(res.code, 2, `${args.join(' ')}: a usage error`)
    t.match(res.stderr, /usage: pxe-ctl (un)?drain NODE/, `${args.join(' ')}: prints the usage`)
  }
})

t.test('drain --wait returns once the node released its shards; --timeout gives up with what is held', async (t) => {
  const fleet = await startFleet(t, { total_shards: 16, max_concurrency: 1 })
  // a alone can hold every shard: b and c drain without --force; a's own drain needs it
  await checkInAll(fleet, { a: 16, b: 8, c: 8 })
  const run = fleet.spawn('drain', 'b', '--wait', '--timeout', '30')
  await until('the drain', () => /b is draining \(plan generation \d+\)/.test(run.output().stdout))
  await until('a progress line', () => /waiting: (1 shard waits|\d+ shards wait) for b to release (it|them)/.test(run.output().stderr))
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
  t.match(timedOut.stderr, /pxe-ctl: error: timed out after 1\.5 s: (1 shard waits|\d+ shards wait) for c to release (it|them)/)
  t.match(timedOut.stderr, /c stays flagged for drain/)
  t.ok(Date.now() - started < 15_000, 'gave up at its timeout')
  t.equal((await fleet.plan()).nodes.find((n: any) => n.node_id === 'c').draining, true)

  const json = fleet.spawn('drain', 'a', '--force', '--wait', '-o', 'json')
  await until('the drain of a', async () => (await fleet.plan()).nodes.find((n: any) => n.node_id === 'a').draining)
  const ack = await fleet.checkIn('a', { capacity: 16 })
  await fleet.checkIn('a', { capacity: 16, generation: ack.generation })
  const out = await json.done
  t.equal(out.code, 0, out.stderr)
  t.match(JSON.parse(out.stdout), { node_id: 'a', draining: true, released: true, unassigned: 16 })
})
