/**
 * One session per shard, of any shard count (SPEC "Handoff safety", "Leases", "Live resharding": "One
 * session per shard, across reshards"), as a property over random histories: honest node processes that
 * check in, apply plans late, claim, crash, get revoked while cut off, rejoin with a new certificate; an
 * operator who starts and aborts reshards (switches happen when the next set is running); controller
 * restarts. The model runs what each process really runs, and every grant (an Identify or a handed-out
 * session) is checked against it: no other process may still run that shard of that count.
 */
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import { durableStateSchema } from '../../src/core/durable-state-schema.js'
import type { DurableState } from '../../src/core/durable-state.js'
import type { PlannerName } from '../../src/core/planner.js'
import type { CheckinOutcome, ControllerSettings } from '../../src/core/types.js'
import { body, cert, seededRandom, SETTINGS, T0 } from './fixtures.js'

const NAMES = ['a', 'B', 'c-1', 'd_3']
const HISTORIES = 250
const STEPS = 200
const LEASE = 30_000

/** One node process (a name with one certificate); a revoked or crashed one runs on until its fail-safe. */
interface Process {
  readonly name: string
  readonly serial: string
  /** "count:shard" of every session it runs. */
  readonly running: Set<string>
  /** Its authority ends LEASE after the last check-in it sent that was answered. */
  lastSent: number
  /** The last answer it accepted, and the newest generation whose removals it has stopped. */
  plan: CheckinOutcome | null
  applied: number | undefined
  /** Still checking in (false: crashed, or revoked and cut off). */
  connected: boolean
  /** Sessions of shards it stopped by plan, for its next check-in. */
  deposit: { shard_id: number; session_id: string; sequence: number; resume_url: string }[]
}

const key = (count: number, shardId: number) => `${count}:${shardId}`

/** The keys a plan lets a process keep or start. */
function allowed(plan: CheckinOutcome): Set<string> {
  const keys = new Set<string>()
  for (let s = plan.rangeStart; s < plan.rangeStart + plan.rangeCount; s++) keys.add(key(plan.totalShards, s))
  if (plan.next !== null) for (let s = plan.next.rangeStart; s < plan.next.rangeStart + plan.next.rangeCount; s++) keys.add(key(plan.next.totalShards, s))
  return keys
}

for (const planner of ['contiguous', 'stable'] as const satisfies readonly PlannerName[])
t.test(`no shard of any count is granted while another process may run it (${planner} planner)`, async (t) => {
  const random = seededRandom(7)
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
  let grants = 0
  let resumes = 0
  let reshards = 0
  let switches = 0
  const violations: string[] = []
  for (let history = 0; history < HISTORIES && violations.length === 0; history++) {
    const settings: ControllerSettings = { ...SETTINGS, totalShards: pick([2, 4, 6]), maxConcurrency: 1, identifyIntervalMs: 0, ...(planner === 'stable' ? { planner } : {}) }
    // half the histories without crashes and revocations, so that reshards get to switch
    const churn = random() < 0.5
    let c = new Controller(settings)
    let now = T0
    let serials = 0
    const processes: Process[] = []
    const current = (name: string) => processes.find((p) => p.name === name && p.connected)

    const checkIn = (p: Process) => {
      const reportNext = p.plan?.next ? [...p.running].filter((k) => k.startsWith(`${p.plan!.next!.totalShards}:`)).length : 0
      const send = (sessions: Process['deposit']) =>
        c.register(now, body(p.name, 4, { generation: p.applied, next_ready_shards: reportNext, ...(sessions.length > 0 ? { sessions } : {}) }), cert(p.serial, T0 + Number.parseInt(p.serial, 16)))
      try {
        try {
          send(p.deposit)
        } catch (err) {
          if ((err as { rule?: string }).rule === undefined) throw err
          send([]) // a refused deposit: the agent sends the check-in again without it
        }
        p.deposit = []
        c.settle()
        p.plan = c.checkinOutcome(p.name, { rotated: false, previousSerial: null }, 0)
        p.lastSent = now
      } catch (err) {
        if ((err as { code?: string }).code !== 'identity_conflict') throw err
        p.connected = false // another certificate of the name holds the record: this process gives up
      }
    }
    const apply = (p: Process) => {
      if (p.plan === null) return
      const keep = allowed(p.plan)
      for (const k of [...p.running]) {
        if (keep.has(k)) continue
        p.running.delete(k)
        const [count, shard] = k.split(':').map(Number) as [number, number]
        // stopped by plan in the current set: its session goes to the shard's next owner
        if (count === p.plan.totalShards && random() < 0.7) p.deposit.push({ shard_id: shard, session_id: `s${shard}`, sequence: 1, resume_url: 'wss://gateway.discord.gg' })
      }
      p.applied = p.plan.generation
    }
    const claim = (p: Process) => {
      if (p.plan === null) return
      const wanted = [...allowed(p.plan)].filter((k) => !p.running.has(k))
      if (wanted.length === 0) return
      const k = pick(wanted)
      const [count, shard] = k.split(':').map(Number) as [number, number]
      const set = count === p.plan.totalShards ? 'current' : 'next'
      let outcome
      try {
        outcome = c.claimIdentify(now, { node_id: p.name, shard_id: shard, ...(set === 'next' ? { set } : {}) }, p.serial)
      } catch (err) {
        const code = (err as { code?: string }).code
        if (code === 'not_owner' || code === 'identity_conflict' || code === 'invalid_request') return
        throw err
      }
      if (!outcome.granted) return
      if (outcome.mode === 'identify') c.identifyReleased(now, outcome.bucket)
      grants += 1
      if (outcome.mode === 'resume') resumes += 1
      for (const other of processes) {
        if (other !== p && other.running.has(k)) violations.push(`history ${history}: ${k} granted to ${p.name}/${p.serial} (${outcome.mode}) while ${other.name}/${other.serial} runs it`)
      }
      p.running.add(k)
    }

    for (let step = 0; step < STEPS && violations.length === 0; step++) {
      now += Math.floor(random() * 4_000)
      // every process's fail-safe: no answered check-in for a lease, everything stops
      for (const p of processes) if (now - p.lastSent >= LEASE) p.running.clear()
      // agents check in every lease / 3 or so (one is sometimes late), usually having applied their plan
      for (const p of processes) {
        if (!p.connected || now - p.lastSent < 8_000 + random() * 8_000) continue
        if (random() < 0.7) apply(p)
        checkIn(p)
      }
      const roll = random()
      const name = pick(NAMES)
      const p = current(name)
      if (roll < 0.3) {
        if (p !== undefined) checkIn(p)
        else {
          // a process starts (first boot, or again after a crash or a revocation: a new certificate then)
          const fresh: Process = { name, serial: (++serials).toString(16), running: new Set(), lastSent: now, plan: null, applied: undefined, connected: true, deposit: [] }
          processes.push(fresh)
          checkIn(fresh)
        }
      } else if (roll < 0.4) {
        if (p !== undefined) apply(p)
      } else if (roll < 0.8) {
        if (p !== undefined) claim(p)
      } else if (roll < 0.82) {
        if (p !== undefined && churn) {
          p.running.clear() // a crash: it stops everything and checks in no more
          p.connected = false
        }
      } else if (roll < 0.84) {
        if (p !== undefined && churn) {
          c.removeRevoked(now, (serial) => serial === p.serial) // revoked while cut off: it runs on until its fail-safe
          p.connected = false
        }
      } else if (roll < 0.88) {
        try {
          const to = pick([2, 4, 6, 8].filter((n) => n !== c.totalShards))
          c.startReshard(now, to)
          reshards += 1
        } catch (err) {
          if (!['reshard_in_progress', 'agents_outdated', 'invalid_request'].includes((err as { code: string }).code)) throw err
        }
      } else if (roll < 0.885) {
        try {
          c.abortReshard(now)
        } catch (err) {
          if ((err as { code: string }).code !== 'not_found') throw err
        }
      } else if (roll < 0.91) {
        // a controller restart (leases count from it; sessions are forgotten)
        const state = durableStateSchema.parse(JSON.parse(JSON.stringify(c.snapshot()))) as DurableState
        c = new Controller(settings, { state, now })
      } else {
        c.expireStaleNodes(now)
      }
      if (c.drainEvents().some((e) => e.kind === 'reshard_switched')) switches += 1
    }
  }
  t.same(violations.slice(0, 5), [], 'no grant while another process may run the shard')
  t.ok(grants > 1000 && resumes > 20 && reshards > 50 && switches > 5, `the histories exercise it: ${grants} grants (${resumes} resumes), ${reshards} reshards, ${switches} switches`)
})
