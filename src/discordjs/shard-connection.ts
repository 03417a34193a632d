/**
 * One shard on @discordjs/ws: a WebSocketManager of its own (shardIds [id], shardCount = the plan's
 * total_shards), so that the agent can start and stop shards one by one. It keeps the session itself
 * (the manager's store is cleared by a resumable destroy), counts the last sequence it delivered, and
 * makes sure that nothing of a stopped shard runs on: @discordjs/ws reconnects 500 ms after some closes,
 * so a stop that lands in that pause would otherwise be followed by a new connection (two sessions on
 * one shard), and events already received must not reach the bot after its stop has been decided.
 */
import { SimpleShardingStrategy, WebSocketManager, WebSocketShardEvents, type CreateWebSocketManagerOptions, type ManagerShardEventsMap, type SessionInfo } from '@discordjs/ws'
import type { SharedGatewayInfo } from './gateway-info.js'
import type { ResumableSession } from '../agent/index.js'

/** What the adapter passes through to every manager (the shard-specific fields are its own). */
export type PassThroughOptions = Omit<
  CreateWebSocketManagerOptions,
  'token' | 'intents' | 'shardCount' | 'shardIds' | 'retrieveSessionInfo' | 'updateSessionInfo' | 'buildIdentifyThrottler' | 'buildStrategy'
>

/** A gateway dispatch as @discordjs/ws emits it. */
export type DispatchPayload = ManagerShardEventsMap[WebSocketShardEvents.Dispatch][0]

/** The parts of @discordjs/ws's socket a stop looks at (a `ws` WebSocket). */
interface RawSocket {
  readonly readyState: number
  on(event: 'error', listener: () => void): unknown
  once(event: 'close', listener: () => void): unknown
  terminate(): void
}
const CONNECTING = 0
const CLOSED = 3

/**
 * The debug message when the grant a shard started with has grown older than maxGrantAgeMs by the time
 * its IDENTIFY could go out, and a fresh one is claimed: one grant spent without an Identify.
 */
export const STALE_START_GRANT = 'the start grant is too old for this IDENTIFY: claiming a fresh one'

/** Resolves once `socket` is closed (the `ws` 'close' event, which destroy() cannot unhook). */
function closeOf(socket: RawSocket): Promise<void> {
  if (socket.readyState === CLOSED) return Promise.resolve()
  return new Promise((resolve) => socket.once('close', resolve))
}

/**
 * The socket of the manager's one shard, if it has one. @discordjs/ws keeps both private (TypeScript
 * only): a stop needs them for the one case its destroy() leaves open, a socket still connecting.
 */
function socketOf(manager: WebSocketManager): (() => RawSocket | null) {
  const shards = (manager as unknown as { strategy?: { shards?: Map<number, { connection?: RawSocket | null }> } }).strategy?.shards
  const shard = shards === undefined ? undefined : [...shards.values()][0]
  return () => shard?.connection ?? null
}

/** Close codes after which Discord will not take this shard back with these settings: the start fails. */
const FATAL_CLOSE_CODES = new Set([4004, 4010, 4011, 4012, 4013, 4014])

export interface ShardConnectionOptions {
  readonly shardId: number
  readonly totalShards: number
  readonly token: string
  readonly intents: number
  readonly wsOptions: PassThroughOptions
  /** A handed-over session to RESUME, or null to IDENTIFY under the grant the start came with. */
  readonly resume: ResumableSession | null
  /** One more controller grant, for every IDENTIFY after the first (or every one, after a refused resume). */
  readonly claimIdentify: (signal: AbortSignal) => Promise<void>
  readonly onDispatch: (shardId: number, payload: DispatchPayload) => void
  readonly onDebug?: (shardId: number, message: string) => void
  /** GET /gateway/bot, shared by the node's shards. */
  readonly gateway: SharedGatewayInfo
  /**
   * The start's grant pays for the first IDENTIFY only if that goes out within this long (ms) of the
   * moment its claim was sent; later, it claims a fresh grant. A grant sent on late could land within
   * Discord's 5 s of the bucket's next grant, which the controller spaces `identify_interval_ms` after
   * this one (counted from when its answer left, which is after the claim was sent).
   */
  readonly maxGrantAgeMs: number
  /** How long ago (ms) the claim of the start's grant was sent (the start context's identifyGrantAgeMs). */
  readonly grantAgeMs: () => number
}

/** Resolves never: where a stopped shard's reconnect attempt is parked (see the file comment). */
const PARKED = new Promise<never>(() => undefined)

/** Rejects once `signal` aborts; never resolves. */
function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason)
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true })
  })
}

export class ShardConnection {
  readonly shardId: number
  private readonly manager: WebSocketManager
  /** The adapter's copy of the session (the one @discordjs/ws resumes from and the deposit reports). */
  private session: SessionInfo | null
  /** The sequence of the last dispatch handed to onDispatch; null before the first. */
  private delivered: number | null
  /** True from the moment a stop is decided: nothing reaches onDispatch, nothing reconnects. */
  private stopped = false
  /** The first IDENTIFY of a start without a session is covered by the grant the start came with. */
  private startGrantUnused: boolean
  private readonly closedFatally: Promise<number>

  constructor(private readonly options: ShardConnectionOptions) {
    this.shardId = options.shardId
    const { shardId, totalShards, resume } = options
    this.session = resume === null ? null : { sessionId: resume.sessionId, sequence: resume.sequence, resumeURL: resume.resumeUrl, shardId, shardCount: totalShards }
    this.delivered = resume === null ? null : resume.sequence
    this.startGrantUnused = resume === null
    this.manager = new WebSocketManager({
      ...options.wsOptions,
      token: options.token,
      intents: options.intents,
      shardCount: totalShards,
      shardIds: [shardId],
      retrieveSessionInfo: () => (this.stopped ? PARKED : this.session),
      updateSessionInfo: (_id, info) => {
        if (!this.stopped) this.session = info
      },
      buildIdentifyThrottler: () => ({ waitForIdentify: (_id, signal) => this.waitForIdentify(signal) }),
      // The stop relies on this strategy's behaviour (one shard, its socket): a caller's own is not taken.
      buildStrategy: (manager) => new SimpleShardingStrategy(manager),
    })
    options.gateway.install(this.manager)
    this.manager.on(WebSocketShardEvents.Dispatch, (payload, id) => {
      if (this.stopped) return // received after the stop was decided: the next owner's RESUME replays it
      this.delivered = payload.s
      options.onDispatch(id, payload)
    })
    if (options.onDebug) this.manager.on(WebSocketShardEvents.Debug, (message, id) => options.onDebug!(id, message))
    // An emitter without an error listener throws; errors end a start through `closedFatally` or connect().
    this.manager.on(WebSocketShardEvents.Error, (err, id) => options.onDebug?.(id, `error: ${err.message}`))
    this.closedFatally = new Promise((resolve) => {
      this.manager.on(WebSocketShardEvents.Closed, (code) => {
        if (FATAL_CLOSE_CODES.has(code)) resolve(code)
      })
    })
  }

  /** Connects; resolves once READY or RESUMED. Rejects on a fatal close code or when `signal` aborts. */
  async start(signal: AbortSignal): Promise<void> {
    const aborted = untilAborted(signal)
    const fatal = this.closedFatally.then((code) => {
      throw new Error(`shard ${this.options.shardId}: the gateway closed with ${code}, which it does not recover from`)
    })
    // Both may reject long after the race is over (a stop aborts the signal, Discord closes 4004 on a
    // token reset): marked handled here, or such a late rejection would end the whole node's process.
    aborted.catch(() => undefined)
    fatal.catch(() => undefined)
    try {
      await Promise.race([this.manager.connect(), aborted, fatal])
    } catch (err) {
      await this.stop(false)
      throw err
    }
  }

  /**
   * Stops the shard: resumably (close code 4200, the session returned with the last sequence delivered)
   * or for good (1000). Resolves once the socket is closed; no event reaches onDispatch from the call on.
   */
  async stop(resumable: boolean): Promise<ResumableSession | null> {
    this.stopped = true
    const session = this.session
    const socket = socketOf(this.manager) // read before destroy() forgets the shard
    const open = socket()
    const destroyed = this.manager.destroy(resumable ? { code: 4200, reason: 'moved to another node' } : { code: 1000, reason: 'stopped' })
    // destroy() may never settle: it aborts a pending wait for HELLO or READY, the aborted wait starts a
    // second destroy(), and that one unhooks the onclose the first awaits. The socket's own close event
    // still comes, and once the socket is closed nothing of the shard runs on (a reconnect is PARKED).
    await (open === null ? destroyed : Promise.race([destroyed, closeOf(open)]))
    // destroy() closes only an open socket; one still connecting (no HELLO yet, so no session on it) is
    // cut, and one the second destroy() left closing is awaited (ws ends a close handshake within 30 s)
    const left = socket()
    if (left !== null && left.readyState !== CLOSED) {
      left.on('error', () => undefined) // aborting a handshake emits an error; destroy() removed the listener
      const closed = closeOf(left)
      if (left.readyState === CONNECTING) left.terminate()
      await closed
    }
    if (!resumable || session === null || this.delivered === null) return null
    return { sessionId: session.sessionId, sequence: this.delivered, resumeUrl: session.resumeURL }
  }

  /**
   * @discordjs/ws's identify throttler. The IDENTIFY goes out as soon as it resolves: a fresh grant is
   * sent on at once (the controller counts its bucket's interval from the moment the answer left), the
   * start's own only while it is younger than maxGrantAgeMs.
   * It must not reject but on `signal` (the socket closed): any other
   * rejection makes the shard reconnect and then IDENTIFY twice on one connection. A claim that cannot
   * be granted (the shard was moved away, the agent stops) waits instead, until the stop that follows
   * closes the socket.
   */
  private async waitForIdentify(signal: AbortSignal): Promise<void> {
    if (this.stopped) return untilAborted(signal)
    if (this.startGrantUnused) {
      this.startGrantUnused = false
      if (this.options.grantAgeMs() <= this.options.maxGrantAgeMs) return
      this.options.onDebug?.(this.options.shardId, STALE_START_GRANT)
    }
    try {
      await this.options.claimIdentify(signal)
    } catch (err) {
      if (signal.aborted) throw err
      return untilAborted(signal)
    }
    if (this.stopped) return untilAborted(signal) // granted, but the stop came first: no IDENTIFY
  }
}
