// A failed state write must not wedge the controller (issue 9 item 4). The fault is real: the state
// directory is replaced by a plain file, so the store's writes fail with the filesystem's own error.
// While state cannot be made durable, requests answer 503 unavailable (never 500) and nothing of the
// durable state changes; the retry with the latest snapshot heals everything once the disk is back.
import t from 'tap'
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { bundle, checkinBody, makePki, request, startTestController } from './harness.js'

const root = t.testdir()
const pki = await makePki(root)
const a = await bundle(pki, 'node-a', 'node')
const b = await bundle(pki, 'node-b', 'node')
const op = await bundle(pki, 'ops-a', 'operator')
const ctl = await startTestController(pki, root, { lease_seconds: 3600 })
t.teardown(() => ctl.running.stop())
const stateDir = join(root, 'state')
const stateFile = join(stateDir, 'state.json')
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const savedNodes = (path: string) => (JSON.parse(readFileSync(path, 'utf8')).body.nodes as Array<{ nodeId: string }>).map((n) => n.nodeId)

t.test('503 while the disk fails, healed by the first successful retry', async (t) => {
  t.equal((await request(ctl.port, pki.ca, a, '/v1/checkin', { body: checkinBody('node-a') })).status, 200)
  t.same(savedNodes(stateFile), ['node-a'])
  renameSync(stateDir, `${stateDir}.away`)
  writeFileSync(stateDir, 'not a directory')

  const join_ = await request(ctl.port, pki.ca, b, '/v1/checkin', { body: checkinBody('node-b') })
  t.equal(join_.status, 503, 'the check-in whose change cannot be made durable gets 503')
  t.same(join_.json, { error: 'unavailable', message: join_.json.message }, 'SPEC shape')
  t.match(join_.json.message, /durable/)
  const during = [
    await request(ctl.port, pki.ca, a, '/v1/checkin', { body: checkinBody('node-a') }),
    await request(ctl.port, pki.ca, op, '/v1/plan'),
    await request(ctl.port, pki.ca, a, '/v1/route/175928847299117063'),
    await request(ctl.port, pki.ca, op, '/v1/nodes/node-a/drain', { body: { draining: true } }),
  ]
  t.same(during.map((r) => r.status), [503, 503, 503, 503], 'no state is revealed or changed while failing; never a 500')
  t.equal((await request(ctl.port, pki.ca, a, '/v1/keys')).status, 200, 'the JWKS needs no state and is still served')
  await sleep(2500) // several retries fail meanwhile
  t.same(savedNodes(join(`${stateDir}.away`, 'state.json')), ['node-a'], 'the state on disk is untouched')
  t.equal(ctl.running.service.durabilityProblem !== null, true, 'the service says why (for readiness)')

  rmSync(stateDir)
  renameSync(`${stateDir}.away`, stateDir)
  let plan = await request(ctl.port, pki.ca, op, '/v1/plan')
  for (let i = 0; i < 40 && plan.status !== 200; i++) {
    await sleep(100)
    plan = await request(ctl.port, pki.ca, op, '/v1/plan')
  }
  t.equal(plan.status, 200, 'served again after the disk came back (no other change needed)')
  t.same(plan.json.nodes.map((n: { node_id: string }) => n.node_id), ['node-a', 'node-b'], 'the join made during the failure is kept')
  t.same(savedNodes(stateFile), ['node-a', 'node-b'], 'and is durable now')
  t.equal(ctl.running.service.durabilityProblem, null)
  const again = await request(ctl.port, pki.ca, b, '/v1/checkin', { body: checkinBody('node-b') })
  t.equal(again.status, 200, 'node-b is served on its retry')
})
