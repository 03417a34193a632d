/**
 * Everything the agents recorded, kept in arrival order, with a live view derived from it: shards each
 * node runs, the plan each node last accepted, grants received, and counters for the summary. Records
 * of one node arrive in order (one worker, one queue); records of different workers may interleave.
 */
import type { FleetRecord } from './protocol.js'

/** A grant as the agent received it. */
export interface ReceivedGrant {
  readonly t: number
  readonly node: string
  readonly shard: number
  readonly generation: number
}

/** The plan a node last accepted. */
export interface AcceptedPlan {
  readonly t: number
  readonly generation: number
  readonly assigned: readonly number[]
}

/** The records of a run and the view the progress line and the convergence check read. */
export class FleetLedger {
  readonly records: FleetRecord[] = []
  readonly grants: ReceivedGrant[] = []
  /** Per node, the shards it runs now and the shard count each was started with. */
  readonly running = new Map<string, Map<number, number>>()
  readonly plans = new Map<string, AcceptedPlan>()
  /** Counters by name (e.g. `claim:bucket_busy`, `authority_lost:lease_expiring`). */
  readonly counters = new Map<string, number>()

  /** Adds a batch from a worker. */
  add(batch: readonly FleetRecord[]): void {
    for (const record of batch) {
      this.records.push(record)
      this.apply(record)
    }
  }

  /** Increments a counter. */
  count(name: string, by = 1): void {
    this.counters.set(name, (this.counters.get(name) ?? 0) + by)
  }

  /** A counter's value (0 when never counted). */
  counter(name: string): number {
    return this.counters.get(name) ?? 0
  }

  /** Shards running on `node` now, each with its shard count. */
  runningOn(node: string): ReadonlyMap<number, number> {
    return this.running.get(node) ?? new Map()
  }

  /** Running sessions (a shard on two nodes counts twice) and distinct shard/count pairs. */
  runningTotals(): { instances: number; distinct: number } {
    const distinct = new Set<string>()
    let instances = 0
    for (const shards of this.running.values()) {
      instances += shards.size
      for (const [s, count] of shards) distinct.add(`${s}/${count}`)
    }
    return { instances, distinct: distinct.size }
  }

  private apply(record: FleetRecord): void {
    if (record.kind === 'start') {
      let map = this.running.get(record.node)
      if (map === undefined) this.running.set(record.node, (map = new Map()))
      map.set(record.shard, record.totalShards)
      this.count('starts')
      return
    }
    if (record.kind === 'stop') {
      // a live reshard runs one number under two counts: the stop of the old one leaves the new one
      const shards = this.running.get(record.node)
      if (shards?.get(record.shard) === record.totalShards) shards.delete(record.shard)
      this.count('stops')
      this.count(`stop:${record.reason}`)
      if (record.aborted) this.count('stops_aborted')
      return
    }
    if (record.kind === 'stale_grant') return this.count('stale_start_grants')
    if (record.kind === 'running') return this.count(`serving:${record.mode}`)
    this.applyEvent(record)
  }

  private applyEvent(record: Extract<FleetRecord, { kind: 'event' }>): void {
    const { event, node, t } = record
    switch (event.type) {
      case 'plan_accepted':
        this.plans.set(node, { t, generation: event.generation, assigned: event.assigned })
        this.count('plans_accepted')
        return
      case 'claim':
        // A handed-over session's grant (mode resume) spends no Identify: the controller audits no identify_granted for it.
        if (event.outcome.kind === 'granted' && event.outcome.mode === 'identify') this.grants.push({ t, node, shard: event.shardId, generation: event.outcome.generation })
        if (event.outcome.kind === 'granted' && event.outcome.mode === 'resume') this.count('claim:granted_resume')
        this.count(`claim:${event.outcome.kind === 'wait' ? event.outcome.reason : event.outcome.kind}`)
        return
      case 'plan_refused':
        return this.count(`plan_refused:${event.reason}`)
      case 'authority_lost':
        return this.count(`authority_lost:${event.reason}`)
      case 'checkin_failed':
        return this.count(/ answered 429/.test(event.detail) ? 'checkin:429' : 'checkin:failed')
      default:
        return this.count(event.type)
    }
  }
}
