// Leaving on purpose over real mTLS (SPEC "Leaving on purpose"): the last check-in of a node that shuts down
// takes it out of the plan at once (audited node_left) and its shards go to the others in the same answer's
// plan; bad values of "leaving" are refused like any bad field and change nothing; a leave from a superseded
// certificate is refused like its check-in.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { bundle, checkinBody, makePki, request, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const ctl = await startTestController(pki, root, { total_shards: 16, max_concurrency: 1 })
t.teardown(() => ctl.running.stop())
const [a, b, op] = await Promise.all([bundle(pki, 'node-a', 'node'), bundle(pki, 'node-b', 'node'), bundle(pki, 'alice', 'operator')])
const call = (id: typeof a, path: string, body?: unknown) => request(ctl.port, pki.ca, id, path, body === undefined ? {} : { body })
const plan = async () => (await call(op, '/v1/plan')).json

t.test('a leave: out of the plan at once, audited, and the answer is the plan without the node', async (t) => {
  await call(a, '/v1/checkin', checkinBody('node-a', { capacity: 16 }))
  const joined = await call(b, '/v1/checkin', checkinBody('node-b', { capacity: 16 }))
  const generation = joined.json.generation as number
  await call(a, '/v1/checkin', checkinBody('node-a', { capacity: 16, generation }))
  await call(b, '/v1/checkin', checkinBody('node-b', { capacity: 16, generation }))
  const before = await plan()
  t.same(before.nodes.map((n: { node_id: string }) => n.node_id), ['node-a', 'node-b'])

  for (const bad of [false, 'yes', 1, null]) {
    const refused = await call(a, '/v1/checkin', { ...checkinBody('node-a', { capacity: 16, generation }), leaving: bad })
    t.equal(refused.status, 400, `leaving: ${JSON.stringify(bad)} is refused`)
    t.match(refused.json.message, /leaving/)
  }
  t.same((await plan()).nodes.map((n: { node_id: string }) => n.node_id), ['node-a', 'node-b'], 'nothing changed')

  const left = await call(a, '/v1/checkin', checkinBody('node-a', { capacity: 16, ready_shards: 0, generation, leaving: true }))
  t.equal(left.status, 200)
  t.equal(left.json.range_count, 0, 'the answer is the plan without the node')
  t.ok(left.json.generation > generation)
  const after = await plan()
  t.same(after.nodes.map((n: { node_id: string }) => n.node_id), ['node-b'], 'out of the live set at once')
  t.equal(after.nodes[0].range_count, 16, 'its shards are the others\'')
  const audit = readFileSync(join(root, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  t.match(audit.find((l) => l.event === 'node_left'), { node_id: 'node-a', serial: String, sessions_deposited: 0 })
})

t.test('a leave from a superseded certificate is refused like its check-in', async (t) => {
  await call(a, '/v1/checkin', checkinBody('node-a', { capacity: 16 }))
  const newer = await bundle(pki, 'node-a', 'node') // a newer certificate of the name
  t.equal((await call(newer, '/v1/checkin', checkinBody('node-a', { capacity: 16 }))).status, 200, 'the rotation')
  const before = await plan()
  const refused = await call(a, '/v1/checkin', checkinBody('node-a', { capacity: 16, leaving: true }))
  t.equal(refused.status, 409)
  t.equal(refused.json.error, 'identity_conflict')
  t.same((await plan()).nodes.map((n: { node_id: string }) => n.node_id), before.nodes.map((n: { node_id: string }) => n.node_id), 'still live')
})
