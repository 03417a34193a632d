// A drain that would leave shards without a node (SPEC "Operator endpoints"), over real mTLS: refused
// with 409 insufficient_capacity (naming how many, the body carrying `unassigned`) and nothing changed
// (same generation, flag not set, nothing audited) unless the body says "force": true; a drain that
// strands nothing is served; bad bodies are 400 and change nothing. Every answer carries `unassigned`.
import t, { type Test } from 'tap'
import https from 'node:https'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { bundle, checkinBody, makePki, request, startTestController, type Identity, type Reply } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const op = await bundle(pki, 'ops-carol', 'operator')
const nodes = new Map<string, Identity>()
for (const name of ['node-a', 'node-b', 'node-c']) nodes.set(name, await bundle(pki, name, 'node'))
const ctl = await startTestController(pki, root, { total_shards: 64, max_concurrency: 16, lease_seconds: 3600 })
const agent = new https.Agent({ keepAlive: true, maxSockets: 1 })
t.teardown(async () => {
  agent.destroy()
  await ctl.running.stop()
})

const checkIn = async (name: string, capacity: number, generation?: number) => {
  const res = await request(ctl.port, pki.ca, nodes.get(name)!, '/v1/checkin', { body: checkinBody(name, { capacity, ...(generation === undefined ? {} : { generation }) }) })
  if (res.status !== 200) throw new Error(`check-in of ${name}: ${res.text}`)
  return res.json
}
const plan = async () => (await request(ctl.port, pki.ca, op, '/v1/plan', { agent })).json
const drain = (node: string, body: unknown): Promise<Reply> => request(ctl.port, pki.ca, op, `/v1/nodes/${node}/drain`, { body, agent })
const drainLines = () =>
  readFileSync(join(root, 'audit.log'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((e) => e.event === 'drain_set')
const nodeOf = (p: any, id: string) => p.nodes.find((n: any) => n.node_id === id)

// Two live nodes of 32 each hold the 64 shards: neither can take the other's.
await checkIn('node-a', 32)
await checkIn('node-b', 32)
const generation = (await plan()).generation
await checkIn('node-a', 32, generation)
await checkIn('node-b', 32, generation)

async function unchanged(t: Test, before: unknown, label: string): Promise<void> {
  t.strictSame(await plan(), before, `${label}: the plan unchanged (generation, flags, ranges)`)
}

t.test('without force: 409 insufficient_capacity naming how many, with unassigned; nothing changed', async (t) => {
  const before = await plan()
  t.equal(before.unassigned, 0)
  const res = await drain('node-a', { draining: true })
  t.equal(res.status, 409, res.text)
  t.strictSame(Object.keys(res.json).sort(), ['error', 'message', 'unassigned'])
  t.equal(res.json.error, 'insufficient_capacity')
  t.equal(res.json.unassigned, 32, 'shards without a node after the drain, in all')
  t.match(res.json.message, /^draining node-a would leave 32 more shards without a node \(32 in all\)/)
  t.match(res.json.message, /"force": true/, 'the message says how to drain all the same')
  await unchanged(t, before, 'refused drain')
  t.equal(nodeOf(await plan(), 'node-a').draining, false, 'the flag is not set')
  t.same(drainLines(), [], 'a refused drain is not audited as a drain')
  // asked again: the same answer (the refusal took its flag back)
  t.equal((await drain('node-a', { draining: true })).status, 409)
  await unchanged(t, before, 'refused again')
})

t.test('bad bodies: 400, nothing changed', async (t) => {
  const before = await plan()
  const bad: [string, unknown][] = [
    ['"force": false', { draining: true, force: false }],
    ['"force": "yes"', { draining: true, force: 'yes' }],
    ['"force": 1', { draining: true, force: 1 }],
    ['"force": null', { draining: true, force: null }],
    ['an extra key', { draining: true, force: true, reason: 'maintenance' }],
    ['force without draining', { force: true }],
    ['draining as a string', { draining: 'true', force: true }],
  ]
  for (const [label, body] of bad) {
    for (const node of ['node-a', 'node-c']) {
      // node-a's drain would strand shards; node-c is not live (its drain is never refused for capacity)
      const res = await drain(node, body)
      t.equal(res.status, 400, `${label} (${node}): status`)
      t.equal(res.json?.error, 'invalid_request', `${label} (${node}): code`)
      t.type(res.json?.message, 'string')
    }
    await unchanged(t, before, label)
  }
  t.same((await plan()).drain_flags_not_live, [], 'no flag on the name that is not live either')
  t.same(drainLines(), [])
})

t.test('with "force": true: 200, the shards left without a node counted', async (t) => {
  const before = await plan()
  const res = await drain('node-a', { draining: true, force: true })
  t.equal(res.status, 200, res.text)
  t.strictSame(res.json, { node_id: 'node-a', draining: true, generation: before.generation + 1, live: true, unassigned: 32 })
  const after = await plan()
  t.equal(after.generation, before.generation + 1)
  t.equal(after.unassigned, 32)
  t.match(nodeOf(after, 'node-a'), { draining: true, range_count: 0 })
  t.match(nodeOf(after, 'node-b'), { range_count: 32 })
  t.match(drainLines(), [{ node_id: 'node-a', draining: true, operator: 'ops-carol', live: true, generation: before.generation + 1 }])
  // node-a is draining already: asking again changes nothing and is not refused
  const again = await drain('node-a', { draining: true })
  t.strictSame(again.json, { node_id: 'node-a', draining: true, generation: after.generation, live: true, unassigned: 32 })
  // node-b's drain now would strand 32 more: refused although shards already lack a node
  const more = await drain('node-b', { draining: true })
  t.equal(more.status, 409)
  t.equal(more.json.unassigned, 64)
  t.match(more.json.message, /would leave 32 more shards without a node \(64 in all\)/)
  await unchanged(t, after, 'the second refusal')
})

t.test('a drain that strands nothing: 200 with unassigned 0; undrain is never refused', async (t) => {
  const undrained = await drain('node-a', { draining: false })
  t.equal(undrained.status, 200)
  t.match(undrained.json, { node_id: 'node-a', draining: false, unassigned: 0 })
  // node-c joins: two of the three can hold every shard
  await checkIn('node-c', 32)
  const before = await plan()
  t.equal(before.unassigned, 0)
  const res = await drain('node-a', { draining: true })
  t.equal(res.status, 200, res.text)
  t.strictSame(res.json, { node_id: 'node-a', draining: true, generation: before.generation + 1, live: true, unassigned: 0 })
  t.equal((await plan()).unassigned, 0)
  // "force": true where none is needed is accepted the same
  t.equal((await drain('node-a', { draining: false, force: true })).status, 200)
  const ghost = await drain('ghost-09', { draining: true })
  t.strictSame(ghost.json, { node_id: 'ghost-09', draining: true, generation: (await plan()).generation, live: false, unassigned: 0 }, 'a name that is not live: its flag is kept, nothing refused')
  // node-b and node-c with node-a back: draining node-b would leave node-a and node-c (64) for 64 shards
  const fine = await drain('node-b', { draining: true })
  t.equal(fine.status, 200)
  t.equal(fine.json.unassigned, 0)
})
