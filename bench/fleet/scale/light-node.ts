/**
 * A light node for the 10,000-node benchmark: the agent's check-in cadence (src/agent/cadence.ts: every
 * lease/3 ±10 %, retries after 0.5, 1, 2 ... s) and wire format on a raw keep-alive mTLS connection, but
 * no plan verification and, outside the drain phase, no Identify claims or shards: those cost the node's
 * own CPU in a real fleet, not the controller's, and here every node shares the machine with the
 * controller. It reports the generation it was given, as an agent running no shard would (each plan is
 * applied at once).
 *
 * While moves are tracked (the drain phase, `track(true)`) it runs its range's shards as a ShardBook: a
 * plan that takes running shards away stops them and reports at once, depositing their sessions (SPEC
 * "Session handoff"), as the agent does after its stops; shards it gains are claimed one at a time
 * (POST /v1/identify, the agent's request budget and handoff probing) and run once granted.
 *
 * With several controller ports (HA replicas) it fails over as the agent's ControllerClient does: the
 * ports in order from the last one that answered, the next on a connection error or a 503 (a busy
 * notice ends the attempt, and the next starts at that port), a keep-alive connection per port (the
 * agent's https.Agent per URL) and one TLS session for all of them (the agent's SharedSessions: replicas
 * share ticket keys).
 */
import type { SecureContext } from 'node:tls'
import { defaultStopMarginMs, defaultStopTimeoutMs } from '../../../src/agent/agent-options.js'
import { ControllerBusyError } from '../../../src/agent/busy-aware-agent.js'
import { CheckinCadence } from '../../../src/agent/cadence.js'
import { FailoverOrder } from '../../../src/agent/failover-order.js'
import { attemptReserveMs } from '../../../src/agent/node-agent.js'
import { DEFAULT_REQUEST_BUDGET, RequestBudget } from '../../../src/agent/request-budget.js'
import { retrySlackMs } from '../../../src/agent/retry-slack.js'
import { sharedNow } from '../shared-clock.js'
import { RawConnection, type RawReply } from './raw-connection.js'
import { ShardBook, type DepositEntry } from './shard-book.js'

/** What every light node of a worker shares. */
export interface LightNodeShared {
  /** The controller replicas' ports, in the order the node tries them. */
  readonly ports: readonly number[]
  /** Counts an outcome (by 1, or by `by`); `sample` is a message kept once per name for the report. */
  readonly count: (name: string, sample?: string, by?: number) => void
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
  /** That moment, in ms after the mark (the kill). */
  readonly failSafeAfterMarkMs: number
  /** Its attempts between the mark and this answer that got none, by outcome (deferred, error_ECONNREFUSED ...). */
  readonly attempts: Readonly<Record<string, number>>
  /** The answered attempt: how long before the fail-safe moment it began (ms; negative: after it), and how long it took until the answer. */
  readonly answeredLeadMs: number
  readonly answeredTookMs: number
  /** Of that attempt, on the port that answered: TCP connect, TLS handshake (both 0 on a connection already open), request to answer (ms). */
  readonly answeredTcpMs: number
  readonly answeredTlsMs: number
  readonly answeredReplyMs: number
  /**
   * How late the timer that started the answered check-in fired (ms): this generator's own event-loop lag.
   * An agent on a machine of its own would have sent it that much sooner.
   */
  readonly answeredTimerLagMs: number
  /**
   * How long before the mark its last renewal had been sent (ms; null: none yet): in a steady state at most
   * one check-in interval (agent/cadence.ts longestRegularDelayMs). More: the node was behind before the kill (its last answer
   * had been slow, as in a cold join's last seconds, or a check-in was still waiting), with less slack.
   */
  readonly renewalAgeAtMarkMs: number | null
}

/**
 * A late node whose lateness is within its own load generator's lag: answered after its fail-safe (by
 * took − lead) by no more than its check-in timer fired late.
 */
export function lateWithinOwnLag(o: MarkOutcome): boolean {
  return o.late && o.answeredTimerLagMs >= o.answeredTookMs - o.answeredLeadMs
}

/** An Identify claim's 200 answer (SPEC "Identify claims", "Session handoff"). */
type IdentifyAnswer =
  | { readonly granted: true; readonly mode: 'identify' | 'resume'; readonly session?: { readonly session_id: string; readonly sequence: number } }
  | { readonly granted: false; readonly reason: 'bucket_busy' | 'handoff_pending' | 'daily_limit'; readonly retry_after_ms: number }

type ErrorAnswer = { error?: string; message?: string; retry_after_ms?: number }

/** One simulated node; see the module comment. */
export class LightNode {
  generation: number | null = null
  /** When this node first got the generation it holds now. */
  generationSince: number | null = null
  rangeStart = 0
  rangeCount = 0
  firstAnswerAt: number | null = null
  lastAnswerAt: number | null = null
  /** While tracking: when a claim was last granted. */
  lastClaimAt: number | null = null
  private maxConcurrency = 1
  private leaseMs: number | null = null
  private lastRenewalSentAt: number | null = null
  /** How late the check-in timer fired last (see MarkOutcome.answeredTimerLagMs). */
  private timerLagMs = 0
  /** The last exchange's split (see MarkOutcome.answeredTcpMs). */
  private lastSplit = { tcpMs: 0, tlsMs: 0, replyMs: 0 }
  private mark: { generation: number | null; rangeStart: number; rangeCount: number; failSafeAt: number; at: number; renewalAgeMs: number | null; attempts: Record<string, number> } | null = null
  markOutcome: MarkOutcome | null = null
  /**
   * A keep-alive connection per port, as the agent's ControllerClient keeps an https.Agent (one socket)
   * per URL: a replica that answered 503 keeps its connection while the node tries the next one, so the
   * node's next attempt there needs no new handshake. (One connection for all ports, closed on every
   * switch, made each node that met a follower's or a loading leader's 503 in a take-over open a second
   * connection to it when it led: a TCP connect and a handshake more, in the storm's first seconds.)
   */
  private readonly conns: Array<RawConnection | null>
  /** Which port an exchange tries first, as the agent's ControllerClient (failover-order.ts). */
  private readonly order: FailoverOrder
  /** The last session ticket the controller gave this node (kept across the controller's restarts, as the agent's https.Agent keeps its session cache). */
  private session: Buffer | undefined
  private readonly cadence = new CheckinCadence(Math.random, sharedNow)
  private timer: NodeJS.Timeout | null = null
  private stopped = false
  private checkinInFlight = false
  private checkinAgain = false
  /** Requests go one at a time (check-ins and claims alike): a RawConnection carries one request at a time, as the agent's one socket per URL does. */
  private chain: Promise<unknown> = Promise.resolve()
  private tracking = false
  private readonly book: ShardBook
  private budget = new RequestBudget(DEFAULT_REQUEST_BUDGET.perSecond, DEFAULT_REQUEST_BUDGET.burst, sharedNow)
  private claimInFlight = false
  private claimTimer: NodeJS.Timeout | null = null

  constructor(
    readonly name: string,
    private readonly capacity: number,
    private readonly context: SecureContext,
    private readonly localAddress: string,
    private readonly shared: LightNodeShared,
  ) {
    this.book = new ShardBook(name.replace(/[^A-Za-z0-9]/g, ''))
    this.order = new FailoverOrder(shared.ports.length)
    this.conns = shared.ports.map(() => null)
  }

  /** Starts checking in after `delayMs`. */
  start(delayMs: number): void {
    this.schedule(delayMs)
  }

  /** Stops for good and closes its connections. */
  stop(): void {
    this.stopped = true
    if (this.timer !== null) clearTimeout(this.timer)
    if (this.claimTimer !== null) clearTimeout(this.claimTimer)
    for (const conn of this.conns) conn?.close()
    this.conns.fill(null)
  }

  /** Notes the plan and the fail-safe deadline now (just before the controller is killed). */
  setMark(): void {
    const lease = this.leaseMs ?? 30_000
    // The agent's own defaults: the fail-safe begins stop timeout + margin before authority ends.
    const failSafeAt = (this.lastRenewalSentAt ?? sharedNow()) + lease - defaultStopTimeoutMs(lease) - defaultStopMarginMs(lease)
    const at = sharedNow()
    const renewalAgeMs = this.lastRenewalSentAt === null ? null : at - this.lastRenewalSentAt
    this.mark = { generation: this.generation, rangeStart: this.rangeStart, rangeCount: this.rangeCount, failSafeAt, at, renewalAgeMs, attempts: {} }
    this.markOutcome = null
  }

  /** How long before the mark its last renewal had been sent (ms; null: no mark, or no renewal before it). */
  get renewalAgeAtMarkMs(): number | null {
    return this.mark?.renewalAgeMs ?? null
  }

  /** Tracks moves from now, with every shard of the current range running (true), or forgets them (false). */
  track(on: boolean): void {
    this.tracking = on
    this.lastClaimAt = null
    if (this.claimTimer !== null) clearTimeout(this.claimTimer)
    if (on) this.book.begin(this.rangeStart, this.rangeCount)
    else this.book.clear()
  }

  /** While tracking: shards of the range that do not run, and sessions not deposited yet. */
  moves(): { missing: number; deposits: number } {
    return this.tracking ? { missing: this.book.missing(this.rangeStart, this.rangeCount), deposits: this.book.depositCount } : { missing: 0, deposits: 0 }
  }

  private schedule(ms: number): void {
    if (this.stopped) return
    if (this.timer !== null) clearTimeout(this.timer)
    const dueAt = sharedNow() + ms
    this.timer = setTimeout(() => {
      this.timerLagMs = Math.max(0, sharedNow() - dueAt)
      void this.checkIn()
    }, ms)
  }

  /** Checks in now, or right after the check-in in flight. */
  private checkInSoon(): void {
    if (this.checkinInFlight) this.checkinAgain = true
    else this.schedule(0)
  }

  private timeoutMs(): number {
    return Math.min(10_000, (this.leaseMs ?? 30_000) / 3)
  }

  /**
   * Sends one request (built when its turn comes) after the ones before it, failing over across the
   * ports (see the module comment). Throws a busy notice at once (its port is tried first next time; on
   * a sweep past it, at the end), else the last error; returns the last 503 when every port answered so.
   */
  private exchange(build: () => Buffer): Promise<RawReply> {
    const run = async (): Promise<RawReply> => {
      const { ports } = this.shared
      let busy: ControllerBusyError | null = null
      let failure: unknown = null
      let unavailable: RawReply | null = null
      for (const index of this.order.attempt()) {
        try {
          const reply = await this.exchangeWith(index, build)
          if (reply.status === 503 && ports.length > 1) {
            unavailable = reply // (its connection stays open for the next attempt there)
            continue
          }
          this.order.answered(index)
          return reply
        } catch (err) {
          if (err instanceof ControllerBusyError) {
            if (this.order.busy(index)) throw err
            busy ??= err // the agent keeps the appointment of a sweep too
          }
          failure = err
        }
      }
      this.order.exhausted()
      if (busy !== null) throw busy
      if (unavailable !== null) return unavailable
      throw failure
    }
    const reply = this.chain.then(run, run)
    this.chain = reply.catch(() => undefined)
    return reply
  }

  /** One request to the port at `index`, on its open connection, else on a new one. */
  private async exchangeWith(index: number, build: () => Buffer): Promise<RawReply> {
    const timeoutMs = this.timeoutMs()
    let conn: RawConnection | null = this.conns[index] ?? null
    try {
      if (conn !== null && conn.dead) {
        conn.close()
        conn = this.conns[index] = null
      }
      this.lastSplit = { tcpMs: 0, tlsMs: 0, replyMs: 0 }
      if (conn === null) {
        conn = this.conns[index] = await RawConnection.open({
          port: this.shared.ports[index]!,
          context: this.context,
          localAddress: this.localAddress,
          timeoutMs,
          session: this.session,
          onSession: (session) => void (this.session = session),
        })
        // stopped while it opened: stop() closed the others already
        if (this.stopped) throw new Error('the node stopped')
        this.shared.count('handshakes')
        if (conn.socket.isSessionReused()) this.shared.count('handshakes_resumed')
        this.lastSplit.tcpMs = conn.tcpMs
        this.lastSplit.tlsMs = conn.tlsMs
      }
      const sentAt = performance.now()
      const reply = await conn.send(build(), timeoutMs)
      this.lastSplit.replyMs = performance.now() - sentAt
      return reply
    } catch (err) {
      conn?.close()
      this.conns[index] = null
      throw err
    }
  }

  private post(path: string, body: string): Buffer {
    return Buffer.from(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, 'latin1')
  }

  private checkinRequest(deposits: readonly DepositEntry[]): Buffer {
    const generation = this.generation === null ? '' : `,"generation":${this.generation}`
    const ready = this.tracking ? this.book.runningCount : this.rangeCount
    const starting = this.tracking ? this.book.wantedCount : 0
    const sessions = deposits.length === 0 ? '' : `,"sessions":${JSON.stringify(deposits)}`
    return this.post('/v1/checkin', `{"node_id":"${this.name}","capacity":${this.capacity},"ready_shards":${Math.min(ready, 128)},"starting_shards":${Math.min(starting, 128)},"backoff_shards":0,"fatal_shards":0${generation}${sessions}}`)
  }

  private async checkIn(): Promise<void> {
    this.checkinInFlight = true
    const delay = await this.checkInOnce()
    this.checkinInFlight = false
    this.schedule(this.checkinAgain ? 0 : delay)
    this.checkinAgain = false
  }

  /** One check-in; returns the delay before the next. */
  private async checkInOnce(): Promise<number> {
    const sentAt = sharedNow()
    this.budget.spend() // as the agent: a check-in never waits for the budget, but counts against it
    let carried: DepositEntry[] = []
    try {
      const reply = await this.exchange(() => {
        carried = this.tracking ? this.book.pendingDeposits() : []
        return this.checkinRequest(carried)
      })
      if (reply.status === 200) {
        if (carried.length > 0) {
          this.book.depositsDone(carried)
          this.shared.count('deposit_checkins')
          this.shared.count('sessions_deposited', undefined, carried.length)
        }
        return this.accept(reply.body, sentAt)
      }
      const error = JSON.parse(reply.body.toString('utf8')) as ErrorAnswer
      if (reply.status === 400 && carried.length > 0) {
        // A refused deposit refuses the whole check-in: its sessions are dropped, the check-in goes again without them.
        this.book.depositsDone(carried)
        this.shared.count('deposit_refused', error.message)
        return 0
      }
      this.shared.count(`status_${reply.status}_${error.error ?? ''}`, error.message)
      this.noteAttempt(`status_${reply.status}`)
      return reply.status === 429 ? (error.retry_after_ms ?? 1000) : this.retryDelay(null)
    } catch (err) {
      if (err instanceof ControllerBusyError) {
        // Deferred at accept time: not a failed attempt but an appointment (counted apart).
        this.shared.count('deferred')
        this.noteAttempt('deferred')
        return this.retryDelay(err.retryAfterMs)
      }
      const outcome = `error_${(err as NodeJS.ErrnoException).code ?? 'other'}`
      this.shared.count(outcome)
      this.noteAttempt(outcome)
      return this.retryDelay(null)
    }
  }

  /** As the agent (node-agent.ts retryDelay): the retry spread over the slack left before the fail-safe, or after it before the lease ends. */
  private retryDelay(busyRetryAfterMs: number | null): number {
    let slackMs: number | null = null
    if (this.lastRenewalSentAt !== null && this.leaseMs !== null) {
      const lease = this.leaseMs
      slackMs = retrySlackMs({
        now: sharedNow(),
        authorityEndsAt: this.lastRenewalSentAt + lease,
        failSafeLeadMs: defaultStopTimeoutMs(lease) + defaultStopMarginMs(lease),
        reserveMs: attemptReserveMs(lease),
      })
    }
    return this.cadence.retry({ slackMs, busyRetryAfterMs })
  }

  /** Takes a 200 answer; returns the delay before the next check-in (0: stopped shards, report at once). */
  private accept(body: Buffer, sentAt: number): number {
    const answer = JSON.parse(body.toString('utf8')) as { generation: number; range_start: number; range_count: number; lease_seconds: number; max_concurrency: number }
    const now = sharedNow()
    this.shared.count('checkins')
    this.leaseMs = answer.lease_seconds * 1000
    this.cadence.setLease(this.leaseMs)
    if (this.generation !== answer.generation) this.generationSince = now
    this.generation = answer.generation
    this.rangeStart = answer.range_start
    this.rangeCount = answer.range_count
    this.maxConcurrency = answer.max_concurrency
    this.lastRenewalSentAt = sentAt
    this.firstAnswerAt ??= now
    this.lastAnswerAt = now
    if (this.mark !== null && this.markOutcome === null) this.markOutcome = this.judgeMark(now, sentAt)
    const next = this.cadence.next()
    if (!this.tracking) return next
    const stopped = this.book.applyPlan(this.rangeStart, this.rangeCount)
    this.pumpClaims()
    if (stopped === 0) return next
    this.shared.count('shards_stopped', undefined, stopped)
    return 0
  }

  /** Sends the next due claim (one in flight at a time), or wakes up when one is due. */
  private pumpClaims(): void {
    if (!this.tracking || this.stopped || this.claimInFlight) return
    if (this.claimTimer !== null) clearTimeout(this.claimTimer)
    const now = sharedNow()
    const next = this.book.nextClaim(now, this.maxConcurrency)
    if (next === null) return
    const wait = 'at' in next ? next.at - now : this.budget.take()
    if (wait > 0) {
      this.claimTimer = setTimeout(() => this.pumpClaims(), wait)
      return
    }
    this.claimInFlight = true
    void this.claim((next as { shard: number }).shard).then(() => {
      this.claimInFlight = false
      this.pumpClaims()
    })
  }

  /** One Identify claim; never throws. */
  private async claim(shard: number): Promise<void> {
    let reply: RawReply
    try {
      reply = await this.exchange(() => this.post('/v1/identify', `{"node_id":"${this.name}","shard_id":${shard}}`))
    } catch (err) {
      this.shared.count(`claim_error_${(err as NodeJS.ErrnoException).code ?? 'other'}`)
      this.book.backOff(shard, sharedNow(), 1000)
      return
    }
    const now = sharedNow()
    if (!this.tracking) return
    if (reply.status !== 200) return this.claimRefused(shard, reply, now)
    const answer = JSON.parse(reply.body.toString('utf8')) as IdentifyAnswer
    if (answer.granted) {
      const resumed = answer.mode === 'resume' ? (answer.session ?? null) : null
      this.shared.count(resumed === null ? 'claim_identify' : 'claim_resume')
      if (!this.book.granted(shard, now, this.maxConcurrency, resumed)) this.shared.count('resume_wrong_shard')
      this.lastClaimAt = now
    } else if (answer.reason === 'handoff_pending') {
      this.shared.count('claim_handoff_pending')
      this.book.waitHandoff(shard, now, answer.retry_after_ms)
    } else {
      this.shared.count(`claim_${answer.reason}`)
      this.book.waitBucket(shard, now, answer.retry_after_ms, this.maxConcurrency)
    }
  }

  private claimRefused(shard: number, reply: RawReply, now: number): void {
    const error = JSON.parse(reply.body.toString('utf8')) as ErrorAnswer
    if (reply.status === 403 && error.error === 'not_owner') {
      // The controller's plan moved on: learn it now, as the agent does.
      this.shared.count('claim_not_owner')
      this.book.drop(shard)
      this.checkInSoon()
      return
    }
    this.shared.count(`claim_status_${reply.status}_${error.error ?? ''}`, error.message)
    this.book.backOff(shard, now, reply.status === 429 ? (error.retry_after_ms ?? 1000) : 1000)
  }

  /** Counts an attempt without an answer while the node waits for its first answer after the mark. */
  private noteAttempt(outcome: string): void {
    if (this.mark === null || this.markOutcome !== null) return
    this.mark.attempts[outcome] = (this.mark.attempts[outcome] ?? 0) + 1
  }

  private judgeMark(now: number, sentAt: number): MarkOutcome {
    const m = this.mark!
    const same = m.generation === this.generation && m.rangeStart === this.rangeStart && m.rangeCount === this.rangeCount
    const keptFrom = Math.max(m.rangeStart, this.rangeStart)
    const keptTo = Math.min(m.rangeStart + m.rangeCount, this.rangeStart + this.rangeCount)
    return { at: now, same, lostShards: m.rangeCount - Math.max(0, keptTo - keptFrom), late: now > m.failSafeAt, failSafeAfterMarkMs: m.failSafeAt - m.at, attempts: m.attempts, answeredLeadMs: m.failSafeAt - sentAt, answeredTookMs: now - sentAt, answeredTcpMs: this.lastSplit.tcpMs, answeredTlsMs: this.lastSplit.tlsMs, answeredReplyMs: this.lastSplit.replyMs, answeredTimerLagMs: this.timerLagMs, renewalAgeAtMarkMs: m.renewalAgeMs }
  }
}
