/**
 * What the REST side records for tests and scenarios to read at the end of a run: one record per
 * request and the totals derived from them. `at` is milliseconds (fractional, monotonic) since the
 * REST side started, the clock its limits are judged on, so the windows below are exactly the ones
 * the limits saw.
 */
import type { Ban } from './rest-limits.js'
import type { RestRouteName } from './rest-routes.js'

/** How the emulator answered a REST request. */
export type RestOutcome =
  | 'ok' // 200
  | 'bad_request' // 400: a body Discord would refuse
  | 'unauthorized' // 401: no or a wrong `Authorization: Bot <token>`
  | 'forbidden' // 403: a channel in rest.forbiddenChannelIds
  | 'not_found' // 404: no such route
  | 'method_not_allowed' // 405
  | 'global_limited' // 429 global: true, X-RateLimit-Scope: global
  | 'route_limited' // 429 global: false, X-RateLimit-Scope: user
  | 'shared_limited' // 429 global: false, X-RateLimit-Scope: shared (not invalid)
  | 'banned' // 429 from a banned client, refused before the API (Cloudflare's ban)

/** One REST request. Tokens are never recorded. */
export interface RestRequestRecord {
  readonly at: number
  /** The client it was counted under: the client header's value, else the IP address. */
  readonly client: string
  readonly method: string
  /** The route it matched, or null (404, and requests refused by a ban). */
  readonly route: RestRouteName | null
  /** The major parameter's value (channel, guild or webhook ID), or null. */
  readonly majorId: string | null
  readonly status: number
  readonly outcome: RestOutcome
  /** Whether it counted as an invalid request (401, 403, 429 but not scope shared; never a ban's refusal). */
  readonly invalid: boolean
  /** Whether the global limit admitted it (it counts in the global window). */
  readonly admitted: boolean
}

/** One ban: the client, and when it started and ends (ms since the REST side started). */
export type BanRecord = Ban

/** `emulator.restStats`. */
export interface RestStats {
  /** Every request under /api, whatever became of it (ban refusals included). */
  readonly requests: number
  readonly byStatus: Readonly<Record<number, number>>
  readonly byOutcome: Readonly<Partial<Record<RestOutcome, number>>>
  /** 429s of the global limit (`global: true`). */
  readonly global429: number
  /** 429s of a route's bucket (`global: false`, scope `user`). */
  readonly route429: number
  /** 429s of a shared resource limit (scope `shared`; not invalid). */
  readonly shared429: number
  /** Requests that reached the API (not refused by a ban) in each whole second since the start: [0] is 0..999 ms. */
  readonly perSecond: readonly number[]
  /** 200 answers in each whole second since the start. */
  readonly okPerSecond: readonly number[]
  /** The most requests that reached the API in any sliding 1000 ms. */
  readonly maxInAnyWindow: number
  /** The same, counting only requests the global limit admitted: never above rest.globalPerSecond. */
  readonly maxAdmittedInAnyWindow: number
  /** Invalid answers per client since the start. */
  readonly invalidByClient: Readonly<Record<string, number>>
  /** Invalid answers per client in the current invalid window (what a ban is judged on; cleared by a ban). */
  readonly invalidInWindowByClient: Readonly<Record<string, number>>
  /** Requests refused because their client was banned. */
  readonly bannedRefusals: number
  /** Every ban, oldest first. */
  readonly bans: readonly BanRecord[]
  /** The clients banned now. */
  readonly bannedClients: readonly string[]
}

/** The most of `times` (any order) within any half-open window [t, t + windowMs). */
export function maxInWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b)
  let best = 0
  let start = 0
  for (let end = 0; end < sorted.length; end++) {
    while ((sorted[end] as number) - (sorted[start] as number) >= windowMs) start++
    best = Math.max(best, end - start + 1)
  }
  return best
}

/** Counts of `times` per whole second since 0. */
export function perWholeSecond(times: readonly number[]): number[] {
  const counts: number[] = []
  for (const at of times) {
    const second = Math.floor(at / 1000)
    while (counts.length <= second) counts.push(0)
    counts[second] = (counts[second] as number) + 1
  }
  return counts
}

/** Totals over the records, for `RestStats`. */
export function summarise(records: readonly RestRequestRecord[]): Pick<RestStats, 'requests' | 'byStatus' | 'byOutcome' | 'global429' | 'route429' | 'shared429' | 'perSecond' | 'okPerSecond' | 'maxInAnyWindow' | 'maxAdmittedInAnyWindow' | 'bannedRefusals'> {
  const byStatus: Record<number, number> = {}
  const byOutcome: Partial<Record<RestOutcome, number>> = {}
  for (const r of records) {
    byStatus[r.status] = (byStatus[r.status] ?? 0) + 1
    byOutcome[r.outcome] = (byOutcome[r.outcome] ?? 0) + 1
  }
  const reached = records.filter((r) => r.outcome !== 'banned').map((r) => r.at)
  return {
    requests: records.length,
    byStatus,
    byOutcome,
    global429: byOutcome.global_limited ?? 0,
    route429: byOutcome.route_limited ?? 0,
    shared429: byOutcome.shared_limited ?? 0,
    perSecond: perWholeSecond(reached),
    okPerSecond: perWholeSecond(records.filter((r) => r.status === 200).map((r) => r.at)),
    maxInAnyWindow: maxInWindow(reached, 1000),
    maxAdmittedInAnyWindow: maxInWindow(records.filter((r) => r.admitted).map((r) => r.at), 1000),
    bannedRefusals: byOutcome.banned ?? 0,
  }
}
