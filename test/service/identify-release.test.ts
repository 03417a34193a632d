// A grant's bucket counts its interval from the moment the answer leaves the service, not from the
// decision: with a daily budget every grant waits for a durable write, and the node IDENTIFYs when it
// reads the answer. Discord counts its 5 s between the IDENTIFYs it receives, so a write that held one
// answer for 800 ms must push the bucket's next grant 800 ms later too.
import t from 'tap'
import { ControllerService } from '../../src/service/controller-service.js'
import { controllerWith, T0 } from '../core/fixtures.js'

/** A service over a store whose writes the test completes by hand, on a clock the test moves. */
function setup() {
  let now = T0
  const writes: (() => void)[] = []
  const controller = controllerWith([['a', 16], ['b', 16]], { totalShards: 32, maxConcurrency: 16, dailyIdentifyLimit: 1000 })
  const service = new ControllerService(controller, {
    now: () => now,
    audit: { record: () => undefined },
    store: { write: () => new Promise<void>((resolve) => writes.push(resolve)) },
  })
  return { service, writes, at: (ms: number) => (now = T0 + ms) }
}
/** The certificate serial controllerWith gave a node (its check-in order). */
const serialOf = (nodeId: string) => `a${['a', 'b'].indexOf(nodeId)}`
const tick = () => new Promise((r) => setImmediate(r))

t.test("a grant held by its durable write: the bucket's next grant is one interval after the answer left", async (t) => {
  const s = setup()
  // The check-ins of controllerWith left a write owed: let it go first.
  await tick()
  for (const w of s.writes.splice(0)) w()
  await tick()
  const first = s.service.claimIdentify({ node_id: 'a', shard_id: 0 }, serialOf('a'))
  await tick()
  t.equal(s.writes.length, 1, 'the grant (counted against the daily budget) is being written')
  s.at(5100)
  const whileHeld = s.service.claimIdentify({ node_id: 'b', shard_id: 16 }, serialOf('b'))
  s.at(800)
  s.writes.shift()!()
  t.match(await first, { granted: true, mode: 'identify', bucket: 0 }, 'answered once durable, 800 ms after the decision')
  t.same(await whileHeld, { granted: false, reason: 'bucket_busy', retryAfterMs: 5100 }, 'one interval after the decision, with the answer still held: busy')
  s.at(5100)
  t.same(await s.service.claimIdentify({ node_id: 'b', shard_id: 16 }, serialOf('b')), { granted: false, reason: 'bucket_busy', retryAfterMs: 800 }, 'the interval counts from the answer')
  s.at(5900)
  const second = s.service.claimIdentify({ node_id: 'b', shard_id: 16 }, serialOf('b'))
  await tick()
  s.writes.shift()!()
  t.match(await second, { granted: true, bucket: 0 })
})

t.test('a grant whose write fails is released too: the bucket is not held for ever', async (t) => {
  const controller = controllerWith([['a', 16], ['b', 16]], { totalShards: 32, maxConcurrency: 16, dailyIdentifyLimit: 1000 })
  const service = new ControllerService(controller, {
    now: () => T0,
    audit: { record: () => undefined },
    store: { write: () => Promise.reject(new Error('EIO: i/o error, write')) },
    writes: { retryMinMs: 60_000, retryMaxMs: 60_000 },
  })
  await t.rejects(service.claimIdentify({ node_id: 'a', shard_id: 0 }, serialOf('a')), { code: 'unavailable' }, 'the answer fails: 503, the node does not IDENTIFY')
  t.match(controller.claimIdentify(T0 + 5100, { node_id: 'b', shard_id: 16 }, serialOf('b')), { granted: true, bucket: 0 }, 'one interval after the failed answer the bucket grants again')
  service.abandon()
})

t.test('a refused claim throws at once, as the route that audits it expects', async (t) => {
  const s = setup()
  t.throws(() => s.service.claimIdentify({ node_id: 'b', shard_id: 0 }, serialOf('b')), { code: 'not_owner' }, 'not_owner is thrown, not a rejected promise')
})
