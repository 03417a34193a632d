// A take-over under the stable planner (SPEC "Planner choice"): the state a leader wrote into etcd, as
// deltas, loads with every node's range, and the new leader plans the same ranges again (no shard moves).
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import type { EtcdKeyValue } from '../../src/ha/etcd-api.js'
import type { WriteOp } from '../../src/ha/etcd-limits.js'
import { HandoffRunIndex } from '../../src/ha/handoff-runs.js'
import { decodeState } from '../../src/ha/state-decode.js'
import { StateLayout } from '../../src/ha/state-layout.js'
import { deltaWrites, type WriteContext } from '../../src/ha/state-writes.js'
import type { ControllerSettings } from '../../src/core/types.js'
import { body, cert, seededRandom, T0 } from '../core/fixtures.js'

const SETTINGS: ControllerSettings = { totalShards: 96, maxConcurrency: 4, leaseSeconds: 30, identifyIntervalMs: 5100, dailyIdentifyLimit: null, planner: 'stable' }
const NAMES = ['a', 'B', 'c-1', 'C.2', 'd_3', 'e', 'f9']
const layout = new StateLayout('/pxe/')

/** etcd's key space, enough of it: keys in byte order and the write operations. */
function apply(kv: Map<string, string>, ops: readonly WriteOp[]): void {
  for (const op of ops) {
    if (op.type === 'put') kv.set(op.key, op.value.toString())
    else if (op.type === 'delete') kv.delete(op.key)
    else {
      const [from, to] = op.type === 'delete_prefix' ? [op.prefix, `${op.prefix}\uffff`] : [op.key, op.rangeEnd]
      for (const key of [...kv.keys()]) if (key >= from && key < to) kv.delete(key)
    }
  }
}
const entries = (kv: Map<string, string>): EtcdKeyValue[] =>
  [...kv.keys()]
    .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
    .map((key) => ({ key, value: Buffer.from(kv.get(key)!), createRevision: '1', modRevision: '1', version: '1', lease: '0' }))
const ranges = (c: Controller, now: number) => JSON.stringify(c.plan(now).nodes.map((n) => [n.nodeId, n.rangeStart, n.rangeCount]))

t.test('stable planner: every take-over over random histories plans the same ranges and generation', async (t) => {
  let problems = 0
  for (let seed = 1; seed <= 40 && problems === 0; seed++) {
    const random = seededRandom(seed)
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
    let n = 0
    const ctx: WriteContext = { layout, grantId: () => `7.${++n}` }
    const c = new Controller(SETTINGS)
    const kv = new Map<string, string>()
    const runs = new HandoffRunIndex(layout)
    let now = T0
    for (let write = 1; write <= 30 && problems === 0; write++) {
      now += Math.floor(random() * 8000)
      const nodeId = pick(NAMES)
      const roll = random()
      if (roll < 0.6) c.register(now, body(nodeId, 4 + Math.floor(random() * 28)), cert(`${NAMES.indexOf(nodeId)}`))
      else if (roll < 0.85) c.setDraining(now, nodeId, random() < 0.5, true)
      else c.removeRevoked(now, (serial) => serial === String(NAMES.indexOf(nodeId)))
      c.settle()
      apply(kv, deltaWrites(c.takeDelta(), ctx, runs))
      const state = decodeState(layout, entries(kv))
      if (JSON.stringify(state) !== JSON.stringify(c.snapshot())) {
        problems += 1
        t.fail(`seed ${seed}, write ${write}: the load differs from the snapshot`)
        break
      }
      const leader = new Controller(SETTINGS, { state: state!, now })
      if (leader.drainEvents().length > 0 || leader.generation !== c.generation || ranges(leader, now) !== ranges(c, now)) {
        problems += 1
        t.fail(`seed ${seed}, write ${write}: the new leader's plan differs`)
      }
    }
  }
  t.equal(problems, 0, 'no take-over moved a shard')
})
