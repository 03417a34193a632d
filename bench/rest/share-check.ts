/**
 * Did any node send above its share? The proxy paces its sends one per 1/q seconds after the last one,
 * so within any 1000 ms a node may send at most floor(q) + 1 requests, where q is the largest share in
 * force at any moment of that window (0 once a share has run out: then nothing at all). Judged on the
 * emulator's records (which node sent each request: the client tap names it) against every share the
 * agent gave its proxy, with its time. The emulator sees a request a little after the proxy sent it, and
 * not always equally late (one event loop runs every part of the run, and a stall of it delays some
 * arrivals but not the next): requests that arrive within 1000 ms may have been sent up to `jitterMs`
 * further apart (at least JITTER_MS; the run passes the longest event-loop stall it saw), so they are
 * judged against a share over 1000 + jitterMs. Pure.
 */
import type { RestRequestRecord } from '../../test/support/gateway/rest-records.js'
import type { ShareChange } from './product-side.js'

/** One window in which a node sent more than its share allowed. */
export interface OverShare {
  readonly node: string
  /** End of the 1000 ms window, ms since the start of the run. */
  readonly atMs: number
  readonly sent: number
  readonly allowed: number
  readonly shareMax: number
}

const WINDOW_MS = 1000
/** The least allowance for a request reaching the emulator later than its predecessor, relative to when each left the proxy. */
export const JITTER_MS = 100

/** The largest share of `changes` (one node's, in time order) in force at any moment of [fromMs, toMs]. */
export function maxShareIn(changes: readonly ShareChange[], fromMs: number, toMs: number): number {
  let best = 0
  let current: ShareChange | null = null
  for (const c of changes) {
    if (c.atMs <= fromMs) current = c
    else if (c.atMs <= toMs) best = Math.max(best, c.perSecond)
  }
  // The one in force at the window's start counts only while it has not run out.
  if (current !== null && current.untilMs > fromMs) best = Math.max(best, current.perSecond)
  return best
}

/**
 * Every window of 1000 ms at the emulator in which a node sent more than floor(share × (1000 + jitterMs) / 1000) + 1.
 * `perfMinusEmulatorMs` turns the emulator's `at` into performance.now() time; `runZeroMs` (performance.now() at the start of the run) is
 * subtracted for the report.
 */
export function sendsAboveShare(records: readonly RestRequestRecord[], changes: readonly ShareChange[], perfMinusEmulatorMs: number, runZeroMs: number, jitterMs = JITTER_MS): OverShare[] {
  const jitter = Math.max(JITTER_MS, jitterMs)
  const out: OverShare[] = []
  const byNode = new Map<string, number[]>()
  for (const r of records) {
    if (r.outcome === 'banned') continue
    const list = byNode.get(r.client) ?? []
    list.push(r.at + perfMinusEmulatorMs)
    byNode.set(r.client, list)
  }
  for (const [node, times] of byNode) {
    const mine = changes.filter((c) => c.node === node).sort((a, b) => a.atMs - b.atMs)
    times.sort((a, b) => a - b)
    let start = 0
    for (let end = 0; end < times.length; end++) {
      const t = times[end]!
      while (times[start]! <= t - WINDOW_MS) start++
      const sent = end - start + 1
      const shareMax = maxShareIn(mine, t - WINDOW_MS - jitter, t)
      const allowed = shareMax > 0 ? Math.floor((shareMax * (WINDOW_MS + jitter)) / 1000) + 1 : 0
      if (sent > allowed) out.push({ node, atMs: t - runZeroMs, sent, allowed, shareMax })
    }
  }
  return out
}

/**
 * The largest sum of the shares in force at the same moment across the nodes, checked at every change
 * (a sum only grows at a change): what the controller promises never to hand out above the safe budget.
 */
export function maxShareSum(changes: readonly ShareChange[]): { readonly sum: number; readonly atMs: number } {
  const sorted = [...changes].sort((a, b) => a.atMs - b.atMs)
  const last = new Map<string, ShareChange>()
  let best = { sum: 0, atMs: 0 }
  for (const c of sorted) {
    last.set(c.node, c)
    let sum = 0
    for (const held of last.values()) if (held.untilMs > c.atMs) sum += held.perSecond
    if (sum > best.sum) best = { sum, atMs: c.atMs }
  }
  return best
}
