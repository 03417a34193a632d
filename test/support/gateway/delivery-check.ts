/**
 * Did the bot get every numbered test event of every session exactly once? The receiver reports what
 * it got (the event's `d.session` and `d.n`, or its shard and sequence); this compares that with what
 * each session produced. Pure.
 */
import type { EventRef, SessionView } from './emulated-session.js'

/** One dispatch the bot received. Name the session (best: `d.session`) or its shard, and the event by `n` or `seq`. */
export interface ReceivedEvent {
  readonly sessionId?: string
  readonly shardId?: number
  readonly numShards?: number
  readonly seq?: number
  readonly n?: number
}

/** The comparison. Empty `lost` and `duplicated` mean exactly-once delivery. */
export interface DeliveryReport {
  /** Test events the sessions produced. */
  readonly expected: number
  /** Received entries that matched a test event (duplicates included). */
  readonly delivered: number
  readonly lost: readonly EventRef[]
  readonly duplicated: ReadonlyArray<EventRef & { readonly times: number }>
  /** Entries that match no produced event (unknown session, no such n/seq, ambiguous shard, n and seq disagree). */
  readonly unknown: readonly ReceivedEvent[]
  /** Entries naming a dispatch that is not a test event (READY, GUILD_CREATE, RESUMED by seq). */
  readonly ignored: number
}

function sessionOf(entry: ReceivedEvent, sessions: readonly SessionView[], byId: Map<string, SessionView>): SessionView | null {
  if (entry.sessionId !== undefined) {
    const s = byId.get(entry.sessionId)
    if (!s || (entry.shardId !== undefined && entry.shardId !== s.shardId)) return null
    return s
  }
  if (entry.shardId === undefined) return null
  const candidates = sessions.filter(
    (s) => s.shardId === entry.shardId && (entry.numShards === undefined || s.numShards === entry.numShards),
  )
  return candidates.length === 1 ? (candidates[0] ?? null) : null
}

/** Compares `received` with the test events of `sessions`. */
export function checkDelivery(sessions: readonly SessionView[], received: Iterable<ReceivedEvent>): DeliveryReport {
  const byId = new Map(sessions.map((s) => [s.id, s]))
  const counts = new Map<string, number>()
  const unknown: ReceivedEvent[] = []
  let delivered = 0
  let ignored = 0
  for (const entry of received) {
    const session = sessionOf(entry, sessions, byId)
    if (!session) {
      unknown.push(entry)
      continue
    }
    let event: EventRef | undefined
    if (entry.n !== undefined) {
      event = session.events[entry.n - 1]
      if (event && entry.seq !== undefined && event.seq !== entry.seq) event = undefined
    } else if (entry.seq !== undefined) {
      const dispatch = session.dispatches[entry.seq - 1]
      if (dispatch && dispatch.n === null) {
        ignored++
        continue
      }
      event = dispatch ? session.events[(dispatch.n ?? 0) - 1] : undefined
    }
    if (!event) {
      unknown.push(entry)
      continue
    }
    delivered++
    const key = `${event.sessionId}#${event.n}`
    counts.set(key, (counts.get(key) ?? 0) + 1)
  }
  const lost: EventRef[] = []
  const duplicated: Array<EventRef & { times: number }> = []
  let expected = 0
  for (const s of sessions) {
    for (const e of s.events) {
      expected++
      const times = counts.get(`${e.sessionId}#${e.n}`) ?? 0
      if (times === 0) lost.push(e)
      else if (times > 1) duplicated.push({ ...e, times })
    }
  }
  return { expected, delivered, lost, duplicated, unknown, ignored }
}

/**
 * What a receiver should report for a dispatch it got on `shardId`: the test event's session and
 * number, or null for any other dispatch (READY, GUILD_CREATE, RESUMED).
 */
export function deliveryEntry(shardId: number, payload: { t?: unknown; s?: unknown; d?: unknown }, eventType: string): ReceivedEvent | null {
  if (payload.t !== eventType || typeof payload.d !== 'object' || payload.d === null) return null
  const { session, n } = payload.d as { session?: unknown; n?: unknown }
  if (typeof session !== 'string' || !Number.isInteger(n)) return null
  return { shardId, sessionId: session, n: n as number, ...(Number.isInteger(payload.s) ? { seq: payload.s as number } : {}) }
}
