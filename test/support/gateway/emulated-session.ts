/**
 * One gateway session: its sequence, the full history of what it dispatched (so a RESUME can replay
 * everything after the client's `seq`, and a test can compare what was produced with what the bot
 * got), and whether it is live, resumable, or gone. Events keep being produced while the session is
 * disconnected but resumable, as Discord queues them for the replay.
 */
import { Op } from './gateway-codes.js'

/** Where a live session's dispatches go: its connection. */
export interface DispatchSink {
  readonly id: number
  /** Sends, or returns false when the socket no longer takes messages (its close handshake began). */
  sendText(json: string): boolean
}

/** A session's state. `disconnected` is resumable until its resume window ends; the rest are final. */
export type SessionState = 'live' | 'disconnected' | 'ended' | 'expired' | 'invalidated'

/** One dispatch the session produced. `n` numbers the test events (1, 2, …); null for READY and the like. */
export interface ProducedDispatch {
  readonly seq: number
  readonly t: string
  readonly n: number | null
  readonly guildId: string | null
  readonly at: number
}

/** A numbered test event as `checkDelivery` reports it. */
export interface EventRef {
  readonly sessionId: string
  readonly shardId: number
  readonly numShards: number
  readonly n: number
  readonly seq: number
}

/** A read-only picture of a session for tests. */
export interface SessionView {
  readonly id: string
  readonly shardId: number
  readonly numShards: number
  readonly state: SessionState
  /** Why it is no longer resumable (e.g. `client closed 1000`), or null. */
  readonly endReason: string | null
  /** The last sequence number it dispatched. */
  readonly seq: number
  /** The live connection, or null. */
  readonly connectionId: number | null
  /** Every dispatch it produced, READY first. */
  readonly dispatches: readonly ProducedDispatch[]
  /** The numbered test events among them. */
  readonly events: readonly EventRef[]
}

interface HistoryEntry extends ProducedDispatch {
  readonly json: string
  // Whether it went out on a connection when produced (false while disconnected or closing).
  readonly written: boolean
}

export class EmulatedSession {
  state: SessionState = 'live'
  endReason: string | null = null
  sink: DispatchSink | null = null
  private seq = 0
  private nextN = 1
  private guildCursor = 0
  private readonly history: HistoryEntry[] = []
  private eventTimer: NodeJS.Timeout | null = null
  private expiryTimer: NodeJS.Timeout | null = null

  constructor(
    readonly id: string,
    readonly shardId: number,
    readonly numShards: number,
    private readonly guildIds: readonly string[],
    private readonly eventType: string,
    private readonly clock: () => number,
  ) {}

  /** Still resumable or live: produces events and accepts a RESUME. */
  get alive(): boolean {
    return this.state === 'live' || this.state === 'disconnected'
  }

  get lastSeq(): number {
    return this.seq
  }

  /** Dispatches `t` with the next sequence number: kept for replay, sent now if live. */
  dispatch(t: string, d: unknown, n: number | null = null, guildId: string | null = null): ProducedDispatch {
    this.seq += 1
    const json = JSON.stringify({ op: Op.Dispatch, s: this.seq, t, d })
    const written = this.state === 'live' && this.sink !== null && this.sink.sendText(json)
    const entry: HistoryEntry = { seq: this.seq, t, n, guildId, at: this.clock(), json, written }
    this.history.push(entry)
    return entry
  }

  /** One numbered test event, `d: {session, n, shard, guild_id}`, for the next guild of the shard in turn. */
  produceEvent(): ProducedDispatch | null {
    if (!this.alive) return null
    const guildId = this.guildIds.length === 0 ? null : (this.guildIds[this.guildCursor++ % this.guildIds.length] ?? null)
    const n = this.nextN++
    const d = { session: this.id, n, shard: [this.shardId, this.numShards], guild_id: guildId }
    return this.dispatch(this.eventType, d, n, guildId)
  }

  /** The dispatches after `seq`, in order, as sent the first time. */
  replayAfter(seq: number): string[] {
    return this.history.filter((e) => e.seq > seq).map((e) => e.json)
  }

  /** Starts (or restarts) producing `perSecond` test events. */
  startEvents(perSecond: number): void {
    this.stopEvents()
    if (perSecond <= 0 || !this.alive) return
    this.eventTimer = setInterval(() => this.produceEvent(), Math.max(1, Math.round(1000 / perSecond)))
    this.eventTimer.unref()
  }

  stopEvents(): void {
    if (this.eventTimer) clearInterval(this.eventTimer)
    this.eventTimer = null
  }

  /** Attaches a connection: the session is live again. */
  attach(sink: DispatchSink): void {
    this.clearExpiry()
    this.sink = sink
    this.state = 'live'
  }

  /** The connection went away resumably: the session waits `windowMs` for a RESUME, then expires. */
  detach(windowMs: number): void {
    this.sink = null
    this.state = 'disconnected'
    this.clearExpiry()
    this.expiryTimer = setTimeout(() => this.finish('expired', `not resumed within ${windowMs} ms`), windowMs)
    this.expiryTimer.unref()
  }

  /**
   * The client closed with 1000/1001: the session ended when its close frame arrived, so what was
   * produced after that (never written: the socket was closing) was never part of the session.
   */
  endByClient(code: number): void {
    for (let last = this.history.at(-1); last && !last.written; last = this.history.at(-1)) {
      this.history.pop()
      this.seq -= 1
      if (last.n !== null) this.nextN = last.n
    }
    this.finish('ended', `client closed ${code}`)
  }

  /** Ends the session for good. */
  finish(state: 'ended' | 'expired' | 'invalidated', reason: string): void {
    this.state = state
    this.endReason = reason
    this.sink = null
    this.stopEvents()
    this.clearExpiry()
  }

  view(): SessionView {
    const dispatches = this.history.map(({ seq, t, n, guildId, at }) => ({ seq, t, n, guildId, at }))
    const events: EventRef[] = []
    for (const e of this.history) {
      if (e.n !== null) events.push({ sessionId: this.id, shardId: this.shardId, numShards: this.numShards, n: e.n, seq: e.seq })
    }
    return {
      id: this.id,
      shardId: this.shardId,
      numShards: this.numShards,
      state: this.state,
      endReason: this.endReason,
      seq: this.seq,
      connectionId: this.sink?.id ?? null,
      dispatches,
      events,
    }
  }

  private clearExpiry(): void {
    if (this.expiryTimer) clearTimeout(this.expiryTimer)
    this.expiryTimer = null
  }
}
