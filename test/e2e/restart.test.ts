// A restart moves no shard and never sends the generation backwards, even after kill -9 mid-burst.
import t from 'tap'
import { join } from 'node:path'
import { JournaledFileStore } from '../../src/state/journaled-file-store.js'
import { bundle, checkinBody, makePki, request, writeTestConfig } from './harness.js'
import { spawnController } from './process.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const nodes = await Promise.all(['rack1-a', 'rack1-b', 'rack2-a'].map((n) => bundle(pki, n, 'node')))
const op = await bundle(pki, 'ops', 'operator')
const configPath = writeTestConfig(pki, root, { total_shards: 96 })
const capacities = [16, 32, 64]
const checkIn = (port: number, i: number, extra: Record<string, unknown> = {}) =>
  request(port, pki.ca, nodes[i]!, '/v1/checkin', { body: checkinBody(['rack1-a', 'rack1-b', 'rack2-a'][i]!, { capacity: capacities[i], ...extra }) })
const view = (r: { json: any }) => ({ generation: r.json.generation, start: r.json.range_start, count: r.json.range_count })

t.test('kill -9 and restart: same generation and ranges on the next check-ins', async (t) => {
  const first = await spawnController(['--config', configPath], root)
  const before = []
  for (let i = 0; i < 3; i++) await checkIn(first.port, i)
  for (let i = 0; i < 3; i++) before.push(view(await checkIn(first.port, i)))
  t.equal(before[2]!.generation, before[0]!.generation, 'plan settled')
  await new Promise((r) => setTimeout(r, 300)) // the state write is asynchronous to the answer
  first.child.kill('SIGKILL')
  await first.exited
  const second = await spawnController(['--config', configPath], root)
  t.teardown(() => void second.child.kill('SIGKILL'))
  const plan = await request(second.port, pki.ca, op, '/v1/plan')
  t.equal(plan.json.generation, before[0]!.generation, 'generation restored')
  for (let i = 0; i < 3; i++) t.same(view(await checkIn(second.port, i)), before[i], `node ${i} keeps its range`)
  const claim = await request(second.port, pki.ca, nodes[0]!, '/v1/identify', { body: { node_id: 'rack1-a', shard_id: before[0]!.start } })
  t.match(claim.json, { granted: false, reason: 'bucket_busy' }, 'every bucket counts as granted at the restart')
  second.child.kill('SIGKILL')
  await second.exited
})

t.test('kill -9 during a burst of drains and check-ins: state valid, generation never backwards', async (t) => {
  for (let round = 0; round < 3; round++) {
    const ctl = await spawnController(['--config', configPath], root)
    let highest = 0
    let stop = false
    const burst = (async () => {
      for (let k = 0; !stop; k++) {
        const target = ['rack1-a', 'rack1-b', 'rack2-a'][k % 3]!
        const r = await request(ctl.port, pki.ca, op, `/v1/nodes/${target}/drain`, { body: { draining: k % 2 === 0 } }).catch(() => null)
        if (r?.status === 200) highest = Math.max(highest, r.json.generation)
        const c = await checkIn(ctl.port, k % 3).catch(() => null)
        if (c?.status === 200) highest = Math.max(highest, c.json.generation)
      }
    })()
    await new Promise((r) => setTimeout(r, 400 + round * 150))
    ctl.child.kill('SIGKILL')
    stop = true
    await burst
    await ctl.exited
    const saved = (await new JournaledFileStore(join(root, 'state')).load())?.meta
    t.ok(saved, `round ${round}: the state file is valid`)
    // Answers wait for the state write, so every generation a client saw is durable.
    const again = await spawnController(['--config', configPath], root)
    const plan = await request(again.port, pki.ca, op, '/v1/plan')
    t.ok(plan.json.generation >= saved!.generation, `round ${round}: generation ${plan.json.generation} >= persisted ${saved!.generation}`)
    t.ok(highest > 0, `round ${round}: the burst got answers before the kill (highest generation ${highest})`)
    t.ok(plan.json.generation >= highest, `round ${round}: generation ${plan.json.generation} vs highest answered ${highest}`)
    again.child.kill('SIGKILL')
    await again.exited
  }
})
