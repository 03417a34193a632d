// SPEC "Live resharding" over real mTLS (certificates from pki/): POST and DELETE /v1/reshard, their
// refusals (nothing changes), the next set in signed and plain plans, next-set claims, the switch, the
// audit lines, and a reshard in progress and a switched shard count across a restart on the file store.
import t from 'tap'
import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { compactVerify, createLocalJWKSet } from 'jose'
import { bundle, checkinBody, makePki, request, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const nodeA = await bundle(pki, 'node-a', 'node')
const nodeB = await bundle(pki, 'node-b', 'node')
const op = await bundle(pki, 'ops-alice', 'operator')
const jwks = createLocalJWKSet(JSON.parse(readFileSync(join(pki.dir, 'plan-jwks.json'), 'utf8')))

const SETTINGS = { total_shards: 8, max_concurrency: 4, daily_identify_limit: 40 }

t.test('refusals, a start, next-set claims, the switch and a restart', async (t) => {
  const ctlRoot = join(root, 'one')
  mkdirSync(ctlRoot)
  let ctl = await startTestController(pki, ctlRoot, SETTINGS)
  t.teardown(() => ctl.running.stop())
  const opCall = (path: string, opts: Parameters<typeof request>[4] = {}) => request(ctl.port, pki.ca, op, path, opts)
  const reshard = (body: unknown) => opCall('/v1/reshard', { body })
  const checkIn = (id: typeof nodeA, nodeId: string, extra: Record<string, unknown> = {}) =>
    request(ctl.port, pki.ca, id, '/v1/checkin', { body: checkinBody(nodeId, { capacity: 8, next_ready_shards: 0, ...extra }) })

  await checkIn(nodeA, 'node-a', { next_ready_shards: undefined })
  t.match((await reshard({ total_shards: 16 })).json, { error: 'agents_outdated' }, 'node-a has not shown it runs a next set')
  const first = (await checkIn(nodeB, 'node-b')).json
  await checkIn(nodeA, 'node-a', { generation: first.generation })
  const before = (await opCall('/v1/plan')).json
  t.equal(before.reshard, null)

  // refused: nothing changes
  const refusals: [unknown, number, string][] = [
    [{ total_shards: 10 }, 400, 'invalid_request'],
    [{ total_shards: 8 }, 400, 'invalid_request'],
    [{ total_shards: '16' }, 400, 'invalid_request'],
    [{ total_shards: 16, extra: 1 }, 400, 'invalid_request'],
    [{ total_shards: 64 }, 409, 'budget_insufficient'],
  ]
  for (const [body, status, error] of refusals) {
    const answer = await reshard(body)
    t.equal(answer.status, status, JSON.stringify(body))
    t.equal(answer.json.error, error, answer.text)
  }
  const byNode = await request(ctl.port, pki.ca, nodeA, '/v1/reshard', { body: { total_shards: 16 } })
  t.equal(byNode.status, 403, 'a node may not reshard')
  const noCert = await request(ctl.port, pki.ca, null, '/v1/reshard', { body: { total_shards: 16 } }).catch(() => null)
  t.ok(noCert === null || noCert.status === 401, 'no certificate: refused')
  t.equal((await opCall('/v1/reshard', { method: 'DELETE' })).status, 404, 'nothing to abort')
  const unchanged = (await opCall('/v1/plan')).json
  t.equal(unchanged.generation, before.generation, 'refusals changed no generation')
  t.equal(unchanged.reshard, null)

  // start
  const started = await reshard({ total_shards: 16 })
  t.equal(started.status, 202)
  t.same(started.json, { from: 8, to: 16, generation: before.generation + 1 })
  t.equal((await reshard({ total_shards: 32 })).json.error, 'reshard_in_progress')
  const a = (await checkIn(nodeA, 'node-a')).json
  t.same(a.next, { total_shards: 16, range_start: 0, range_count: 8, assigned: [0, 1, 2, 3, 4, 5, 6, 7] })
  const { payload } = await compactVerify(a.plan_jws, jwks)
  t.same(JSON.parse(new TextDecoder().decode(payload)).next, a.next, 'the signed plan carries the same next set')
  t.match((await opCall('/v1/plan')).json.reshard, { phase: 'identifying', from_total_shards: 8, total_shards: 16, ready_shards: 0 })

  // next-set claims
  const notOwner = await request(ctl.port, pki.ca, nodeA, '/v1/identify', { body: { node_id: 'node-a', shard_id: 9, set: 'next' } })
  t.equal(notOwner.status, 403)
  t.equal(notOwner.json.error, 'not_owner')
  const grant = await request(ctl.port, pki.ca, nodeB, '/v1/identify', { body: { node_id: 'node-b', shard_id: 9, set: 'next' } })
  t.match(grant.json, { granted: true, mode: 'identify', set: 'next', shard_id: 9, bucket: 1 })
  const badSet = await request(ctl.port, pki.ca, nodeB, '/v1/identify', { body: { node_id: 'node-b', shard_id: 9, set: 'other' } })
  t.equal(badSet.status, 400)

  // a restart in the middle: the reshard continues
  await ctl.running.stop()
  ctl = await startTestController(pki, ctlRoot, SETTINGS)
  const resumed = (await opCall('/v1/plan')).json
  t.match(resumed.reshard, { phase: 'identifying', total_shards: 16, generation: before.generation + 1 })
  const gen = resumed.generation

  // every next-set shard reported running: the switch
  await checkIn(nodeA, 'node-a', { generation: gen, next_ready_shards: 8 })
  const switched = (await checkIn(nodeB, 'node-b', { generation: gen, next_ready_shards: 8 })).json
  t.equal(switched.total_shards, 16)
  t.equal(switched.generation, gen + 1)
  t.same([switched.range_start, switched.range_count, switched.next], [8, 8, undefined])
  t.equal((await opCall('/v1/plan')).json.reshard, null)
  const route = (await request(ctl.port, pki.ca, op, `/v1/route/${(13n << 22n).toString()}`)).json
  t.match(route, { shard_id: 13, node_id: 'node-b' })

  // a restart with the configuration unchanged keeps 16 shards
  await ctl.running.stop()
  ctl = await startTestController(pki, ctlRoot, SETTINGS)
  const after = (await opCall('/v1/plan')).json
  t.equal(after.total_shards, 16)
  t.equal(after.generation, gen + 1, 'no new generation')

  const audit = readFileSync(join(ctlRoot, 'audit.log'), 'utf8')
  t.match(audit, /"event":"reshard_started"[^\n]*"operator":"ops-alice"/)
  t.match(audit, /"event":"identify_granted"[^\n]*"set":"next"/)
  t.match(audit, /"event":"reshard_switched"[^\n]*"to_total_shards":16/)
})

t.test('an abort drops the next set under a new generation (audited with the operator)', async (t) => {
  const ctlRoot = join(root, 'abort')
  mkdirSync(ctlRoot)
  const ctl = await startTestController(pki, ctlRoot, SETTINGS)
  t.teardown(() => ctl.running.stop())
  await request(ctl.port, pki.ca, nodeA, '/v1/checkin', { body: checkinBody('node-a', { capacity: 8, next_ready_shards: 0 }) })
  const started = (await request(ctl.port, pki.ca, op, '/v1/reshard', { body: { total_shards: 16 } })).json
  const aborted = await request(ctl.port, pki.ca, op, '/v1/reshard', { method: 'DELETE' })
  t.equal(aborted.status, 200)
  t.same(aborted.json, { from: 8, to: 16, generation: started.generation + 1, aborted: true })
  const a = (await request(ctl.port, pki.ca, nodeA, '/v1/checkin', { body: checkinBody('node-a', { capacity: 8 }) })).json
  t.equal(a.next, undefined)
  t.equal(a.generation, started.generation + 1)
  const audit = readFileSync(join(ctlRoot, 'audit.log'), 'utf8')
  t.match(audit, /"event":"reshard_aborted"[^\n]*"operator":"ops-alice"/)
})
