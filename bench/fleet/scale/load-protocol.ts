/** Messages between the fleet benchmark and its load-generator processes, and what a status holds. */

/** One light node as the orchestrator assigns it. */
export interface LoadNodeSpec {
  readonly name: string
  readonly capacity: number
  readonly bundleDir: string
  readonly localAddress: string
}

/** What the orchestrator tells a load generator. */
export type ToLoad =
  /** `ports`: the controller replicas, in the order every node tries them. */
  | { readonly type: 'init'; readonly ports: readonly number[]; readonly ca: string; readonly nodes: readonly LoadNodeSpec[] }
  | { readonly type: 'start'; readonly spreadMs: number }
  | { readonly type: 'status' }
  | { readonly type: 'mark' }
  /** Moves tracked from now (the drain phase: shards run, are stopped with a deposit, claimed), or no more. */
  | { readonly type: 'track'; readonly on: boolean }
  | { readonly type: 'stop' }

/** A load generator's figures at one moment (times on the shared monotonic clock). */
export interface LoadStatus {
  readonly nodes: number
  /** Nodes that got at least one answer, and when the last of them got its first. */
  readonly answered: number
  readonly lastFirstAnswerAt: number | null
  readonly minGeneration: number | null
  readonly maxGeneration: number | null
  /** Among nodes at maxGeneration: when the last of them got it. */
  readonly lastReachedMaxAt: number | null
  readonly atMaxGeneration: number
  /** Since the mark: nodes answered again, with the same plan, shards lost, answers after the fail-safe, the last answer's time. */
  readonly markRenewed: number
  readonly markSame: number
  readonly markLostShards: number
  readonly markLate: number
  /**
   * The late ones: how many had their fail-safe moment in each second after the mark ("9": 9.0-9.9 s),
   * and their attempts without an answer before the late one, by outcome (deferred, error_ECONNREFUSED ...).
   */
  readonly markLateByFailSafe: Readonly<Record<string, number>>
  readonly markLateAttempts: Readonly<Record<string, number>>
  /**
   * The late ones answered after their fail-safe by no more than their own check-in timer fired late:
   * their lateness is within this generator's own lag (an agent on a machine of its own sends on time).
   */
  readonly markLateWithinLag: number
  /**
   * How long before the mark each node's last renewal had been sent, by second ("12": 12.0-12.9 s), of
   * every node and of the late ones (MarkOutcome.renewalAgeAtMarkMs): beyond one check-in interval, a
   * node was behind before the storm began.
   */
  readonly markRenewalAgeBySecond: Readonly<Record<string, number>>
  readonly markLateRenewalAgeBySecond: Readonly<Record<string, number>>
  /**
   * The attempt each node got its first answer after the mark with, for the late nodes and the ones on
   * time: how long before the node's fail-safe moment it began, and how long it took until the answer
   * (handshake and check-in), both as counts by quarter-second bucket ("-250": -250..-1 ms). Tells a
   * node that came back too late from one that waited too long in the controller's queue.
   */
  readonly markAnswered: { readonly late: AnsweredTally; readonly onTime: AnsweredTally }
  /** This process's event-loop delay since the mark (ms; null before a mark); combined: the worst process's. */
  readonly markLoopDelayMs: LoopDelay | null
  readonly markLastAt: number | null
  /** Shards in the ranges the nodes hold. */
  readonly shardsHeld: number
  /** While moves are tracked: shards of the nodes' ranges that do not run, sessions not deposited yet, the last grant's time. */
  readonly movesMissing: number
  readonly movesDeposits: number
  readonly lastClaimAt: number | null
  readonly counters: Readonly<Record<string, number>>
  /** CPU seconds of this process so far. */
  readonly cpuSeconds: number
}

/** Counts by quarter-second bucket (ms, as a string) of when the answered attempt began before the fail-safe, and how long it took. */
export interface AnsweredTally {
  readonly leadMs: Readonly<Record<string, number>>
  readonly tookMs: Readonly<Record<string, number>>
  /** The same attempt's parts on the port that answered: TCP connect, TLS handshake, request to answer. */
  readonly tcpMs: Readonly<Record<string, number>>
  readonly tlsMs: Readonly<Record<string, number>>
  readonly replyMs: Readonly<Record<string, number>>
  /** How late the node's check-in timer fired (its generator's event-loop lag), by LAG_BUCKET_MS bucket. */
  readonly lagMs: Readonly<Record<string, number>>
}

/** The width of an AnsweredTally's buckets (ms). */
export const ANSWER_BUCKET_MS = 250

/**
 * The width of the timer-lag buckets (ms): a lag is mostly tens of ms, and a median read in 250 ms
 * buckets would say 0.13 s for none at all.
 */
export const LAG_BUCKET_MS = 10

/** The bucket `ms` falls in, as an AnsweredTally key: its start, a multiple of `bucketMs`. */
export function answerBucket(ms: number, bucketMs = ANSWER_BUCKET_MS): string {
  return String(Math.floor(ms / bucketMs) * bucketMs)
}

/** The median of counts by bucket (the bucket's start plus half a bucket), or null when there are none. */
export function medianOfBuckets(counts: Readonly<Record<string, number>>, bucketMs = ANSWER_BUCKET_MS): number | null {
  const entries = Object.entries(counts).map(([k, n]) => [Number(k), n] as const).sort((a, b) => a[0] - b[0])
  const total = entries.reduce((sum, [, n]) => sum + n, 0)
  if (total === 0) return null
  let seen = 0
  for (const [k, n] of entries) {
    seen += n
    if (seen * 2 >= total) return k + bucketMs / 2
  }
  return null
}

/** Event-loop delay percentiles (ms). */
export interface LoopDelay {
  readonly p50: number
  readonly p99: number
  readonly max: number
}

/** What a load generator answers. */
export type FromLoad =
  | { readonly type: 'ready' }
  | { readonly type: 'started' }
  | { readonly type: 'status'; readonly status: LoadStatus }
  | { readonly type: 'marked' }
  | { readonly type: 'tracked' }
  | { readonly type: 'stopped' }

/** Adds up counts by name. */
export function tally(records: readonly Readonly<Record<string, number>>[]): Record<string, number> {
  const out: Record<string, number> = {}
  for (const r of records) for (const [k, v] of Object.entries(r)) out[k] = (out[k] ?? 0) + v
  return out
}
