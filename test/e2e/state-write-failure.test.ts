// A failed state write must not wedge the controller (issue 9 item 4). The fault is injected around the
// real store (SetNextError-style): while it fails, requests answer 503 unavailable (never 500) and nothing
// reaches the disk; the retry writes the whole latest state and heals everything without another change.
import t from 'tap'
import { join } from 'node:path'
import { JournaledFileStore } from '../../src/state/journaled-file-store.js'
import { FailingStore } from '../support/failing-store.js'
import { bundle, checkinBody, makePki, request, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const a = await bundle(pki, 'node-a', 'node')
const b = await bundle(pki, 'node-b', 'node')
const op = await bundle(pki, 'ops-a', 'operator')
let faulty: FailingStore | undefined
const ctl = await startTestController(pki, root, { lease_seconds: 3600 }, { wrapStore: (s) => (faulty = new FailingStore(s)) })
t.teardown(() => ctl.running.stop())
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const onDisk = async () => (await new JournaledFileStore(join(root, 'state')).load())?.nodes.map((n) => n.nodeId)

t.test('503 while the disk fails, healed by the first successful retry', async (t) => {
  t.equal((await request(ctl.port, pki.ca, a, '/v1/checkin', { body: checkinBody('node-a') })).status, 200)
  t.same(await onDisk(), ['node-a'])
  faulty!.failing = true

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
  await sleep(1500)
  t.ok(faulty!.failedWrites >= 3, `retried meanwhile (${faulty!.failedWrites} failed writes), none wedged`)
  t.same(await onDisk(), ['node-a'], 'the state on disk is untouched')
  t.match(ctl.running.service.durabilityProblem, /EIO/, 'the service says why (for readiness)')

  faulty!.failing = false
  let plan = await request(ctl.port, pki.ca, op, '/v1/plan')
  for (let i = 0; i < 40 && plan.status !== 200; i++) {
    await sleep(100)
    plan = await request(ctl.port, pki.ca, op, '/v1/plan')
  }
  t.equal(plan.status, 200, 'served again once the disk works (no other change needed)')
  t.same(plan.json.nodes.map((n: { node_id: string }) => n.node_id), ['node-a', 'node-b'], 'the join made during the failure is kept')
  t.same(await onDisk(), ['node-a', 'node-b'], 'and is durable now (the retry wrote the whole state)')
  t.equal(ctl.running.service.durabilityProblem, null)
  const again = await request(ctl.port, pki.ca, b, '/v1/checkin', { body: checkinBody('node-b') })
  t.equal(again.status, 200, 'node-b is served on its retry')
})
