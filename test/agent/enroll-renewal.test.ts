// Enrollment and renewal through the library (NodeAgent.enroll) against a real controller over TLS, with
// the signer running in the test: one-minute certificates renewed three times while the shards keep
// running: no shard stops, no new Identify claim, each renewal a rotation on the controller, no 409.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { NodeAgent } from '../../src/agent/node-agent.js'
import { makePki } from '../e2e/harness.js'
import { enrollController, TestSigner, token } from './enroll-support.js'
import { FAST, Recorder, until, urlOf } from './support.js'
import { sample } from './metrics-text.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const ctl = await enrollController(pki, join(root, 'ctl'), { total_shards: 4, max_concurrency: 4 })
t.teardown(() => ctl.running.stop())
const signer = await TestSigner.create(pki, ctl.port)
signer.start(200)
t.teardown(() => signer.stop())
const audit = (event: string) => readFileSync(join(root, 'ctl', 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((l) => l.event === event)

t.test('one-minute certificates renew three times while the shards keep running', async (t) => {
  const rec = new Recorder()
  const text = await token(pki, { names: 'rack-r*', uses: 1, approve: 'auto', certTtlMs: 60_000 })
  const name = 'rack-r1'
  const agent = await NodeAgent.enroll({
    controllers: [urlOf(ctl.port)],
    capacity: 4,
    ...FAST,
    // renewed at about a third of the minute (the default two thirds would take two minutes for three rounds)
    renewAtFraction: 0.35,
    onStart: (ctx) => void rec.shardEvents.push({ at: performance.now(), wall: Date.now(), node: name, shard: ctx.shardId, totalShards: ctx.totalShards, maxConcurrency: ctx.maxConcurrency, kind: 'start' }),
    onStop: (ctx) => void rec.shardEvents.push({ at: performance.now(), wall: Date.now(), node: name, shard: ctx.shardId, totalShards: ctx.totalShards, maxConcurrency: ctx.maxConcurrency, kind: 'stop', reason: ctx.reason }),
    onEvent: (event) => void rec.agentEvents.push({ at: performance.now(), node: name, event }),
    enrollment: { enrollUrls: [`https://127.0.0.1:${ctl.enrollPort}`], token: text, name, ca: pki.ca },
  })
  t.teardown(() => agent.stop())
  const first = agent.currentIdentity
  t.equal(first.nodeId, name)
  t.ok(first.notAfter - first.notBefore <= 60_000, 'a one-minute certificate')
  await agent.start()
  await until('four shards running', () => rec.running(name).length === 4, 30_000)
  const claims = rec.events(name, 'claim').length
  const starts = rec.shardEvents.filter((e) => e.kind === 'start').length

  await until('three renewals', () => rec.events(name, 'certificate_renewed').length >= 3, 95_000)
  const renewedAt = rec.events(name, 'certificate_renewed')[2]!.at
  await until('a plan accepted with the third renewed certificate', () => rec.events(name, 'plan_accepted').some((e) => e.at > renewedAt), 15_000)

  t.same(rec.shardEvents.filter((e) => e.kind === 'stop'), [], 'no shard stopped')
  t.equal(rec.shardEvents.filter((e) => e.kind === 'start').length, starts, 'no shard started again')
  t.equal(rec.events(name, 'claim').length, claims, 'no new Identify claim')
  t.same(rec.events(name, 'certificate_renewal_failed').map((e) => e.event.detail), [], 'no renewal failed')
  t.same(rec.running(name), [0, 1, 2, 3])
  const current = agent.currentIdentity
  t.not(current.serial, first.serial, 'the agent runs on a renewed certificate')
  t.equal(signer.issued('renew').length, 3, 'three renewals signed')
  const rotations = audit('identity_rotated').filter((l) => l.node_id === name)
  t.equal(rotations.length, 3, 'each renewal recorded by the controller as a rotation')
  t.equal(rotations[2].to_serial.replace(/^0+/, ''), current.serial)
  t.same(audit('identity_conflict'), [], 'no 409 identity_conflict')
  t.same(signer.errors, [])

  const metrics = await agent.metrics.metrics()
  t.equal(sample(metrics, 'pxe_node_cert_renewal_failures_total'), 0)
  t.equal(sample(metrics, 'pxe_node_cert_expiry_timestamp_seconds'), current.notAfter / 1000)
})
