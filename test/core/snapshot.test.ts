import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import { controllerSnapshotSchema } from '../../src/core/snapshot-schema.js'
import type { ControllerSnapshot } from '../../src/core/types.js'
import { body, cert, controllerWith, LEASE_MS, SETTINGS, T0 } from './fixtures.js'

const settings = { ...SETTINGS, dailyIdentifyLimit: 1000 }

/** A controller with drains, handoffs, reported generations and daily grants in its state. */
function busyController(): Controller {
  const c = controllerWith([['compaq-01', 16], ['dell-01', 32]], settings)
  c.setDraining(T0, 'ghost', true)
  c.claimIdentify(T0, { node_id: 'dell-01', shard_id: 40 })
  c.checkIn(T0 + 1000, body('compaq-02', 16, { ready_shards: 3 }), cert('c2')) // takes shards from compaq-01 / dell-01
  c.checkIn(T0 + 2000, body('compaq-01', 16, { generation: 2 }), cert('a0'))
  return c
}

const roundTrip = (snapshot: ControllerSnapshot): ControllerSnapshot =>
  controllerSnapshotSchema.parse(JSON.parse(JSON.stringify(snapshot)))

t.test('snapshot -> JSON -> schema -> restore gives the same plan and generation', async (t) => {
  const before = busyController()
  const snapshot = before.snapshot()
  t.ok(snapshot.handoffs.length > 0, 'the fixture has pending handoffs')
  const restartAt = T0 + 5000
  const after = new Controller(settings, { snapshot: roundTrip(snapshot), now: restartAt })
  t.same(after.snapshot(), snapshot, 'the same state, handoffs and daily grants included')
  t.equal(after.generation, before.generation)
  t.same(after.drainEvents(), [], 'a restart moves no shard')
  for (const node of snapshot.nodes) {
    const again = after.checkIn(restartAt + 10, body(node.nodeId, node.capacity), cert(node.certSerial))
    const { rangeStart, rangeCount } = node
    t.match(again, { generation: before.generation, rangeStart, rangeCount, rotated: false }, node.nodeId)
  }
  t.same(after.drainEvents(), [], 'nor does checking in again')
})

t.test('after a restore every bucket is busy and leases count from the restart', async (t) => {
  const snapshot = roundTrip(busyController().snapshot())
  const restartAt = T0 + 60_000 // later than every old lease
  const c = new Controller(settings, { snapshot, now: restartAt })
  t.same(c.claimIdentify(restartAt, { node_id: 'compaq-01', shard_id: 1 }), {
    granted: false,
    reason: 'bucket_busy',
    retryAfterMs: settings.identifyIntervalMs,
  })
  t.match(c.claimIdentify(restartAt + 5100, { node_id: 'compaq-01', shard_id: 1 }), { granted: true })
  t.equal(c.plan(restartAt + LEASE_MS).nodes.length, 3, 'live at exactly one lease after the restart')
  t.same(c.expireStaleNodes(restartAt + LEASE_MS + 1).sort(), ['compaq-01', 'compaq-02', 'dell-01'])
})

t.test('restored handoffs still hold, until the old owner acknowledges', async (t) => {
  const snapshot = roundTrip(busyController().snapshot())
  const pending = snapshot.handoffs[0]!
  const c = new Controller(settings, { snapshot, now: T0 + 9000 })
  const owner = c.ownerOf(pending.shardId)!
  t.match(c.claimIdentify(T0 + 20_000, { node_id: owner, shard_id: pending.shardId }), { reason: 'handoff_pending' })
})

t.test('the daily budget survives a restart; grants outside the window are dropped', async (t) => {
  const snapshot = roundTrip(busyController().snapshot())
  t.same(snapshot.dailyGrants, [T0])
  const later = new Controller(settings, { snapshot, now: T0 + 86_400_000 })
  t.same(later.snapshot().dailyGrants, [])
  const limited = new Controller({ ...settings, dailyIdentifyLimit: 1 }, { snapshot, now: T0 + 10_000 })
  t.match(limited.claimIdentify(T0 + 20_000, { node_id: 'compaq-01', shard_id: 0 }), { reason: 'daily_limit', retryAfterMs: 86_400_000 - 20_000 })
  // The clock went back across the restart: the grant still counts (as made at the restart), never dropped.
  const earlier = new Controller({ ...settings, dailyIdentifyLimit: 1 }, { snapshot, now: T0 - 5000 })
  t.same(earlier.snapshot().dailyGrants, [T0 - 5000])
  t.match(earlier.claimIdentify(T0, { node_id: 'compaq-01', shard_id: 0 }), { reason: 'daily_limit', retryAfterMs: 86_400_000 - 5000 })
})

t.test('a changed total_shards re-plans with a higher generation', async (t) => {
  const snapshot = roundTrip(busyController().snapshot())
  const c = new Controller({ ...settings, totalShards: 32 }, { snapshot, now: T0 + 9000 })
  t.equal(c.generation, snapshot.generation + 1)
  t.equal(c.plan(T0 + 9000).unassigned, 0)
  t.same(c.snapshot().handoffs, [])
})

t.test('the schema refuses what is not a snapshot', async (t) => {
  const good = busyController().snapshot()
  const bad: [string, unknown][] = [
    ['unknown key', { ...good, extra: 1 }],
    ['version 2', { ...good, version: 2 }],
    ['negative generation', { ...good, generation: -1 }],
    ['bad node id', { ...good, nodes: [{ ...good.nodes[0]!, nodeId: '../x' }] }],
    ['unknown node key', { ...good, nodes: [{ ...good.nodes[0]!, lastSeen: 1 }] }],
    ['upper-case serial', { ...good, nodes: [{ ...good.nodes[0]!, certSerial: 'AB' }] }],
    ['fractional grant', { ...good, dailyGrants: [1.5] }],
    ['missing handoffs', { ...good, handoffs: undefined }],
    ['CRL number as a JSON number', { ...good, crlNumber: 7 }],
    ['CRL number in hex', { ...good, crlNumber: '0x07' }],
    ['CRL number with a leading zero', { ...good, crlNumber: '07' }],
    ['negative CRL number', { ...good, crlNumber: '-1' }],
    ['CRL number over 20 octets', { ...good, crlNumber: '9'.repeat(50) }],
  ]
  for (const [label, value] of bad) t.notOk(controllerSnapshotSchema.safeParse(value).success, label)
})

t.test('the highest CRL number: carried, persisted when it grows, optional in older state files', async (t) => {
  const c = busyController()
  t.equal(c.crlNumber, null)
  t.notOk('crlNumber' in c.snapshot(), 'no CRL number recorded: the field is absent, as in older files')
  const v0 = c.persistVersion
  c.recordCrlNumber(5n)
  t.equal(c.persistVersion, v0 + 1, 'a higher number moves the persist version')
  c.recordCrlNumber(5n)
  c.recordCrlNumber(4n)
  t.equal(c.persistVersion, v0 + 1, 'an equal or lower one changes nothing')
  t.equal(c.crlNumber, 5n)
  const huge = 2n ** 159n
  c.recordCrlNumber(huge)
  const snapshot = roundTrip(c.snapshot())
  t.equal(snapshot.crlNumber, huge.toString(), 'written in decimal, exactly')
  t.equal(new Controller(settings, { snapshot, now: T0 + 5000 }).crlNumber, huge, 'restored exactly')
  const { crlNumber: _dropped, ...older } = snapshot
  t.equal(new Controller(settings, { snapshot: roundTrip(older), now: T0 + 5000 }).crlNumber, null, 'a state file from before loads')
})

t.test('a snapshot with overlapping ranges stops the restore', async (t) => {
  const good = busyController().snapshot()
  const overlapping = { ...good, nodes: good.nodes.map((n) => ({ ...n, rangeStart: 0 })) }
  t.throws(() => new Controller(settings, { snapshot: overlapping, now: T0 }), RangeError)
})
