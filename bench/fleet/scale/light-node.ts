/**
 * A light node for the 10,000-node benchmark: the agent's check-in cadence (src/agent/cadence.ts: every
 * lease/3 ±10 %, retries after 0.5, 1, 2 ... s) and wire format on a raw keep-alive mTLS connection, but
 * no plan verification, Identify claims or shards: those cost the node's own CPU in a real fleet, not the
 * controller's, and here every node shares the machine with the controller. It reports the generation
 * it was given, as an agent running no shard would (each plan is applied at once).
 */
import type { SecureContext } from 'node:tls'
import { defaultStopMarginMs, defaultStopTimeoutMs } from '../../../src/agent/agent-options.js'
import { CheckinCadence } from '../../../src/agent/cadence.js'
import { sharedNow } from '../shared-clock.js'
import { RawConnection } from './raw-connection.js'

/** What every light node of a worker shares. */
export interface LightNodeShared {
  readonly port: number
  /** Counts an outcome; `sample` is a message kept once per name for the report. */
  readonly count: (name: string, sample?: string) => void
}

/** A node's view after its first answer following the mark (just before a kill -9). */
export interface MarkOutcome {
  readonly at: number
  /** Same generation and range as at the mark. */
  readonly same: boolean
  /** Shards of its range at the mark that it no longer holds. */
  readonly lostShards: number
  /** The answer came after the moment its agent would have stopped its shards (fail-safe). */
  readonly late: boolean
}

/** One simulated node; see the module comment. */
export class LightNode {
  generation: number | null = null
  /** When this node first got the generation it holds now. */
  generationSince: number | null = null
  rangeStart = 0
  rangeCount = 0
  firstAnswerAt: number | null = null
  lastAnswerAt: number | null = null
  private leaseMs: number | null = null
  private lastRenewalSentAt: number | null = null
  private mark: { generation: number | null; rangeStart: number; rangeCount: number; failSafeAt: number } | null = null
  markOutcome: MarkOutcome | null = null
  private conn: RawConnection | null = null
  /** The last session ticket the controller gave this node (kept across the controller's restarts, as the agent's https.Agent keeps its session cache). */
  private session: Buffer | undefined
  private readonly cadence = new CheckinCadence(Math.random)
  private timer: NodeJS.Timeout | null = null
  private stopped = false

  constructor(
    readonly name: string,
    private readonly capacity: number,
    private readonly context: SecureContext,
    private readonly localAddress: string,
    private readonly shared: LightNodeShared,
  ) {}

  /** Starts checking in after `delayMs`. */
  start(delayMs: number): void {
    this.schedule(delayMs)
  }

  /** Stops for good and closes the connection. */
  stop(): void {
    this.stopped = true
    if (this.timer !== null) clearTimeout(this.timer)
    this.conn?.close()
  }

  /** Notes the plan and the fail-safe deadline now (just before the controller is killed). */
  setMark(): void {
    const lease = this.leaseMs ?? 30_000
    // The agent's own defaults: the fail-safe begins stop timeout + margin before authority ends.
    const failSafeAt = (this.lastRenewalSentAt ?? sharedNow()) + lease - defaultStopTimeoutMs(lease) - defaultStopMarginMs(lease)
    this.mark = { generation: this.generation, rangeStart: this.rangeStart, rangeCount: this.rangeCount, failSafeAt }
    this.markOutcome = null
  }

  private schedule(ms: number): void {
    if (this.stopped) return
    this.timer = setTimeout(() => void this.checkIn(), ms)
  }

  private request(): Buffer {
    const generation = this.generation === null ? '' : `,"generation":${this.generation}`
    const body = `{"node_id":"${this.name}","capacity":${this.capacity},"ready_shards":${Math.min(this.rangeCount, 128)},"starting_shards":0,"backoff_shards":0,"fatal_shards":0${generation}}`
    return Buffer.from(`POST /v1/checkin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, 'latin1')
  }

  private async checkIn(): Promise<void> {
    const sentAt = sharedNow()
    const timeoutMs = Math.min(10_000, (this.leaseMs ?? 30_000) / 3)
    try {
      if (this.conn === null || this.conn.dead) {
        this.conn = await RawConnection.open({
          port: this.shared.port,
          context: this.context,
          localAddress: this.localAddress,
          timeoutMs,
          session: this.session,
          onSession: (session) => void (this.session = session),
        })
        this.shared.count('handshakes')
        if (this.conn.socket.isSessionReused()) this.shared.count('handshakes_resumed')
      }
      const reply = await this.conn.send(this.request(), timeoutMs)
      if (reply.status === 200) return this.accept(reply.body, sentAt)
      const error = JSON.parse(reply.body.toString('utf8')) as { error?: string; message?: string; retry_after_ms?: number }
      this.shared.count(`status_${reply.status}_${error.error ?? ''}`, error.message)
      this.schedule(reply.status === 429 ? (error.retry_after_ms ?? 1000) : this.cadence.retry())
    } catch (err) {
      this.conn?.close()
      this.conn = null
      this.shared.count(`error_${(err as NodeJS.ErrnoException).code ?? 'other'}`)
      this.schedule(this.cadence.retry())
    }
  }

  private accept(body: Buffer, sentAt: number): void {
    const answer = JSON.parse(body.toString('utf8')) as { generation: number; range_start: number; range_count: number; lease_seconds: number }
    const now = sharedNow()
    this.shared.count('checkins')
    this.leaseMs = answer.lease_seconds * 1000
    this.cadence.setLease(this.leaseMs)
    if (this.generation !== answer.generation) this.generationSince = now
    this.generation = answer.generation
    this.rangeStart = answer.range_start
    this.rangeCount = answer.range_count
    this.lastRenewalSentAt = sentAt
    this.firstAnswerAt ??= now
    this.lastAnswerAt = now
    if (this.mark !== null && this.markOutcome === null) this.markOutcome = this.judgeMark(now)
    this.schedule(this.cadence.next())
  }

  private judgeMark(now: number): MarkOutcome {
    const m = this.mark!
    const same = m.generation === this.generation && m.rangeStart === this.rangeStart && m.rangeCount === this.rangeCount
    const keptFrom = Math.max(m.rangeStart, this.rangeStart)
    const keptTo = Math.min(m.rangeStart + m.rangeCount, this.rangeStart + this.rangeCount)
    return { at: now, same, lostShards: m.rangeCount - Math.max(0, keptTo - keptFrom), late: now > m.failSafeAt }
  }
}
