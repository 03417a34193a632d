// A controller started with "planner": "stable" serves, and a restart (kill -9) moves no shard: the stable
// planner plans on from the persisted ranges (SPEC "Planner choice").
import t from 'tap'
import { join } from 'node:path'
import { JournaledFileStore } from '../../src/state/journaled-file-store.js'
import { bundle, checkinBody, makePki, request, writeTestConfig } from './harness.js'
import { spawnController } from './process.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const names = ['rack1-a', 'rack1-b', 'rack2-a', 'rack2-b']
const nodes = await Promise.all(names.map((n) => bundle(pki, n, 'node')))
const op = await bundle(pki, 'ops', 'operator')
const configPath = writeTestConfig(pki, root, { total_shards: 96, planner: 'stable' })
const checkIn = (port: number, i: number) => request(port, pki.ca, nodes[i]!, '/v1/checkin', { body: checkinBody(names[i]!, { capacity: 64 }) })
const view = (r: { json: any }) => ({ generation: r.json.generation, start: r.json.range_start, count: r.json.range_count })

t.test('stable planner: a drain moves only the drained node\'s shards; kill -9 and restart keep every range', async (t) => {
  const first = await spawnController(['--config', configPath], root)
  for (let i = 0; i < 4; i++) await checkIn(first.port, i)
  const settled = []
  for (let i = 0; i < 4; i++) settled.push(view(await checkIn(first.port, i)))
  t.equal(settled.reduce((sum, v) => sum + v.count, 0), 96, 'every shard assigned')
  const drained = await request(first.port, pki.ca, op, '/v1/nodes/rack1-b/drain', { body: { draining: true } })
  t.equal(drained.status, 200)
  const before = []
  for (let i = 0; i < 4; i++) before.push(view(await checkIn(first.port, i)))
  t.equal(before[1]!.count, 0, 'the drained node holds nothing')
  for (const i of [0, 2, 3]) {
    const [was, now] = [settled[i]!, before[i]!]
    t.ok(now.start <= was.start && now.start + now.count >= was.start + was.count, `${names[i]} keeps the shards it had`)
  }
  await new Promise((r) => setTimeout(r, 300)) // the state write is asynchronous to the answer
  first.child.kill('SIGKILL')
  await first.exited
  const saved = await new JournaledFileStore(join(root, 'state')).load()
  t.equal(saved?.meta.planner, 'stable', 'the state names its planner')
  t.ok(saved?.nodes.every((n) => n.range !== undefined), 'and carries the ranges')
  const second = await spawnController(['--config', configPath], root)
  t.teardown(() => void second.child.kill('SIGKILL'))
  const plan = await request(second.port, pki.ca, op, '/v1/plan')
  t.equal(plan.json.generation, before[0]!.generation, 'generation restored')
  for (let i = 0; i < 4; i++) t.same(view(await checkIn(second.port, i)), before[i], `${names[i]} keeps its range`)
  second.child.kill('SIGKILL')
  await second.exited
})
