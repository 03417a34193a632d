/**
 * Makes the controller's state durable and times the answers: an answer is computed at a point where the
 * state it shows is exactly what is being written, and released once that write is durable — so no node is
 * ever shown a generation, range or grant that a crash could take back. One write at a time; changes that
 * arrive during a write (check-ins of joining nodes, say) are settled (re-planned) and written together next.
 *
 * Re-plans are spaced: a round that has to re-plan (joins arrived) starts at least `settleIntervalMs` after
 * the last one that did, so the joins of a cold join are planned together in a few generations instead of
 * one generation per round — each costs the re-plan, a journal line, and every node a new plan to take.
 * (Writes themselves are fast and synchronous; without the spacing a round would carry one or two joins.)
 * Every round first yields once to the event loop (setImmediate), so the requests read in the same turn
 * share one write: a group commit.
 * A round that re-plans nothing never waits; but an answer asked for while a re-planning round waits is
 * released with that round (or, past the round's limit below, a later one), so under a join storm grants
 * and drain flags can wait up to the interval too.
 *
 * A failed write never wedges the controller: it is retried (exponential backoff; the store then writes the
 * whole state), every answer waiting for it gets 503 `unavailable` (never a 500), new work is refused with
 * 503 while no write has succeeded since, and the first successful write heals everything.
 *
 * A round releases at most `maxAnswersPerRound` answers; the rest wait for the next round (a state at
 * least as new, durable by then), after a turn of the event loop. Computing and sending an answer is
 * synchronous work (the node's plan, its signature, the TLS write), and a fleet that checks in in waves
 * queued 8,721 answers in one round at 10,000 nodes: released together, they held the event loop for
 * over 2 s, past an HA leader's lease TTL, and its lease keeper (which renews only while the loop shows
 * life) let the term end. Operators' answers (`urgent`) go first, so a drain is not queued behind a wave.
 * When one waits as a write ends, its round starts at once (after the re-plan interval if joins wait)
 * and, with a store that writes asynchronously (etcd), that write's answers are sent while the
 * operator's write is in flight, not before it: sending a thousand check-in answers (signing, TLS) took
 * 0.3-0.75 s of this thread at 10,000 nodes, which a drain waited through before its own write began.
 * The answers were computed before their write and are durable; sending them later shows nothing else.
 * (A store that writes within the call, the file store, gains nothing: they go out before the next round.)
 *
 * Some durable changes no answer waits for (`backlog`: the generation each node reported, see
 * core/state-tracker.ts) are written in the background: at most `maxBacklogPerWrite` of them per write,
 * at most one such write per `backlogIntervalMs`, never in a write an operator's answer waits for, and
 * every one of them in a whole write. A write of nothing else holds no answer back, and its failure
 * refuses nothing (the next write is whole). They neither start a round nor hold an answer back; they only
 * keep the writes an answer waits for small while shards move (an operator's drain waited up to 2.2 s at
 * 10,000 nodes behind writes of thousands of reports).
 */
import { AppError } from '../errors.js'

export interface DurableWriterOptions {
  /** Brings the state up to date before a batch point (the deferred re-plan) and forwards its events. */
  readonly settle: () => void
  /** The version of the state in memory; it moves with every change that must be made durable. */
  readonly version: () => number
  /**
   * Makes the changes since the last successful write durable, taking them synchronously at the call,
   * with at most `backlog` of the background changes (Infinity: all of them).
   * `whole` is true after a failed write: the changes it carried are lost to the deltas, so the store
   * must write the whole state.
   */
  readonly write: (whole: boolean, backlog: number) => Promise<void>
  /** How many background changes wait (see the module comment); none when absent. */
  readonly backlog?: () => number
  /** The least time between two writes that carry background changes (ms, default 1,000). */
  readonly backlogIntervalMs?: number
  /** The most background changes one write carries (default 2,000). */
  readonly maxBacklogPerWrite?: number
  /** True when the next settle() re-plans (joins or capacity changes made the plan stale). */
  readonly needsSettle?: () => boolean
  /** The least time between two rounds that re-plan (ms, default 250; 0: none). */
  readonly settleIntervalMs?: number
  /** The most answers one round computes and releases (default 1,000; see the module comment). */
  readonly maxAnswersPerRound?: number
  /** Called on each failed write, with how many failed in a row. */
  readonly onFailure?: (err: Error, consecutive: number) => void
  /** Called on the first successful write after failures. */
  readonly onRecovered?: (failedWrites: number) => void
  /** Called on each failed write of background changes only (no answer waited; nothing is refused), with how many failed in a row. */
  readonly onBackgroundFailure?: (err: Error, consecutive: number) => void
  /** First retry delay after a failure (doubles up to `retryMaxMs`). */
  readonly retryMinMs?: number
  readonly retryMaxMs?: number
}

interface Waiter {
  readonly compute: () => unknown
  resolve(value: unknown): void
  reject(err: unknown): void
}

/** See the module comment: a cold join at a few hundred joins per second makes a handful of generations per second. */
export const DEFAULT_SETTLE_INTERVAL_MS = 250

/**
 * See the module comment: at ~0.2–0.3 ms of synchronous work per check-in answer (Node 24, this 2-core
 * machine), 1,000 hold the event loop for a fraction of a second, far below any lease TTL (2 s at least).
 */
export const DEFAULT_MAX_ANSWERS_PER_ROUND = 1000

/**
 * See the module comment: 2,000 node records are one etcd transaction of ~0.5 MB (0.36–0.38 s measured on
 * this 2-core machine beside a 10,000-node fleet); at one such write a second the background keeps up with a fleet
 * whose every node reports a new generation at each of its check-ins (~1,000 a second at 10,000 nodes).
 */
export const DEFAULT_BACKLOG_INTERVAL_MS = 1000
export const DEFAULT_MAX_BACKLOG_PER_WRITE = 2000

const UNAVAILABLE_MESSAGE = 'the controller cannot make its state durable right now; retry shortly'
const unavailable = () => new AppError('unavailable', UNAVAILABLE_MESSAGE)

/** Drives the writes and releases answers (see the module comment). */
export class DurableWriter {
  private durable = 0
  private running: Promise<void> | null = null
  /** True exactly while a write loop runs (set and cleared synchronously, unlike `running`). */
  private looping = false
  private failures = 0
  private lastError: Error | null = null
  private retryTimer: NodeJS.Timeout | undefined
  private queue: Waiter[] = []
  /** Operators' answers: taken before `queue` (see the module comment). */
  private urgent: Waiter[] = []
  /** The durable answers of the last write, not yet sent because an operator's write went first. */
  private held: (() => void) | null = null
  private stopped = false
  /** A write failed since the last success: the next one must be whole. */
  private wholeNext = false
  /** Set by abandon(): this process may no longer write. */
  private abandoned = false
  /** When (performance.now()) the last round that re-planned settled. */
  private lastReplanAt = Number.NEGATIVE_INFINITY
  /** When (performance.now()) the last write that carried background changes started. */
  private lastBacklogAt = Number.NEGATIVE_INFINITY
  /** Kicks a round when background changes become due while nothing else runs. */
  private backlogTimer: NodeJS.Timeout | undefined
  /** True while the write under way carries background changes only (see answer()). */
  private background = false
  /** Background-only writes failed in a row. */
  private backgroundFailures = 0

  constructor(private readonly opts: DurableWriterOptions) {
    const max = opts.maxAnswersPerRound
    // 0, a negative or NaN would take no answer in any round: the loop would spin and answer nobody
    if (max !== undefined && !(Number.isInteger(max) && max >= 1)) throw new RangeError(`maxAnswersPerRound must be a whole number of at least 1, not ${max}`)
    // likewise: a background write of nothing would be due again at once, forever
    const perWrite = opts.maxBacklogPerWrite
    if (perWrite !== undefined && !(Number.isInteger(perWrite) && perWrite >= 1)) throw new RangeError(`maxBacklogPerWrite must be a whole number of at least 1, not ${perWrite}`)
  }

  /** True while the last write failed and none succeeded since. */
  get failing(): boolean {
    return this.lastError !== null
  }

  /** The error of the last failed write while failing (for readiness reasons), else null. */
  get failure(): Error | null {
    return this.lastError
  }

  /** Throws 503 `unavailable` while failing: work that could change state must not start. */
  assertAvailable(): void {
    if (this.lastError !== null) throw unavailable()
  }

  /**
   * The answer `compute()` gives at a point where memory equals what is (being) written, once durable:
   * at once when nothing is pending, else after the write that covers the current state. `urgent`
   * (an operator's change): released before the waiting answers of nodes.
   */
  answer<T>(compute: () => T, needsSettle = false, urgent = false): Promise<T> {
    if (this.lastError !== null || this.abandoned) return Promise.reject(unavailable())
    // (during a background-only write memory's answers are durable already: see writeRounds)
    if ((!this.looping || this.background) && !needsSettle && this.opts.version() === this.durable) {
      try {
        return Promise.resolve(compute())
      } catch (err) {
        return Promise.reject(err)
      }
    }
    return new Promise<T>((resolve, reject) => {
      ;(urgent ? this.urgent : this.queue).push({ compute, resolve: resolve as (v: unknown) => void, reject })
      this.kick()
    })
  }

  /**
   * The state may have moved (e.g. a timer expired nodes): write it. The service kicks after every
   * request, and a round starts even when nothing moved: that round (one turn of the event loop) is what
   * lets a busy loop release the answers of one turn together. Skipping it when nothing moved was tried
   * (2026-12-05): 32 keep-alive connections checking in back to back then cost 1.24–1.25× the ceiling's
   * CPU instead of 0.90–0.95× (answered one by one, each Ed25519 signature runs between the parsing of
   * other requests), and new connections or sparse check-ins gained nothing measurable.
   */
  kick(): void {
    if (!this.looping && !this.stopped && this.lastError === null) this.running = this.loop()
  }

  /**
   * At stop: no more retries; writes the whole latest state once more (always: a clean stop leaves one
   * compact snapshot) and throws if that fails.
   */
  async flushFinal(): Promise<void> {
    this.stopped = true
    clearTimeout(this.retryTimer)
    clearTimeout(this.backlogTimer)
    await this.running
    this.opts.settle()
    const version = this.opts.version()
    await this.opts.write(true, Number.POSITIVE_INFINITY)
    this.durable = version
    this.lastError = null
    this.wholeNext = false
    this.release(this.takeQueue(Number.POSITIVE_INFINITY)) // the last answers of a stopping controller
  }

  /**
   * This process may no longer write (HA: its leadership ended): no more writes or retries, and every
   * answer waiting or asked for gets 503 `unavailable`. A write in flight ends on its own (it is fenced).
   */
  abandon(): void {
    this.abandoned = true
    this.stopped = true
    clearTimeout(this.retryTimer)
    clearTimeout(this.backlogTimer)
    for (const w of this.takeQueue(Number.POSITIVE_INFINITY)) w.reject(unavailable())
  }

  private loop(): Promise<void> {
    this.looping = true
    return this.writeRounds()
  }

  /**
   * Writes until memory is durable. The finally clears `looping` synchronously as this very call ends
   * (never in a later microtask, which could clear the flag of the next loop): see answer().
   */
  private async writeRounds(): Promise<void> {
    try {
      for (;;) {
        // Group commit: the requests read in this turn of the event loop join the round. The file store
        // writes synchronously, so without this yield every state-changing request of a reconnect storm
        // paid a journal append and an fdatasync of its own, each blocking the loop (a restart measured
        // 208 rounds for 500 nodes releasing their handoffs; with a busy disk one fdatasync took 0.9 s).
        // (Not when an operator's answer waits with the last write's answers held: see the module comment.)
        if (this.held === null) await new Promise<void>((resolve) => setImmediate(resolve))
        if (this.replanWaitMs() > 0) this.sendHeld() // held answers wait for no timer
        // No await between the check and settle(): joins arriving in between would re-plan unspaced.
        for (let waitMs = this.replanWaitMs(); waitMs > 0; waitMs = this.replanWaitMs()) await new Promise((resolve) => setTimeout(resolve, waitMs))
        if (this.abandoned) return
        if (this.opts.needsSettle?.() === true) this.lastReplanAt = performance.now()
        this.opts.settle()
        const version = this.opts.version()
        const backlog = this.backlogDue()
        if (version === this.durable) {
          this.sendHeld() // older than what follows
          this.release(this.takeQueue()) // nothing (more) that an answer waits for: memory is durable
          if (backlog > 0) {
            // Background changes only: nobody waits for this write, and answers asked meanwhile need
            // nothing it carries (answer() releases them at once: an etcd election can hold a write for
            // seconds). Its failure loses nothing an answer showed: no 503s; the next write is whole.
            this.background = true
            try {
              await this.writeCarrying(this.wholeNext, backlog)
              this.wholeNext = false
              this.backgroundFailures = 0
            } catch (err) {
              this.wholeNext = true
              this.backgroundFailures += 1
              this.opts.onBackgroundFailure?.(err instanceof Error ? err : new Error(String(err)), this.backgroundFailures)
            } finally {
              this.background = false
            }
            if (this.stopped) return
            continue
          }
          if (this.waiting > 0) continue // more answers than one round releases: the rest after a turn of the event loop
          this.scheduleBacklog()
          return
        }
        // an operator's answer waits for no background change
        const carried = this.urgent.length > 0 ? 0 : backlog
        const batch = this.takeQueue()
        const answers = batch.map(settleAnswer) // computed before the write: exactly the state it writes
        // (in an async function: a store that throws at the call fails this round like one that rejects)
        const writing = (async () => this.writeCarrying(this.wholeNext, carried))()
        // The last write's answers, held for this one (an operator's): sent once its request is on its way
        // (after the store's own immediates), while etcd works.
        if (this.held !== null) setImmediate(() => this.sendHeld())
        try {
          await writing
        } catch (err) {
          for (const w of batch) w.reject(unavailable())
          this.fail(err instanceof Error ? err : new Error(String(err)))
          return
        }
        this.wholeNext = false
        this.durable = version
        if (this.held !== null) {
          // A store that wrote within the call (the file store): the held answers first, then a turn of the
          // loop, so that no more than one round's worth is sent in one go.
          this.sendHeld()
          await new Promise<void>((resolve) => setImmediate(resolve))
        }
        const send = () => batch.forEach((w, i) => deliver(w, answers[i]!))
        if (this.urgent.length > 0 && !this.stopped) {
          this.held = send // an operator's write first: see the module comment
          continue
        }
        send()
        if (this.stopped) return
      }
    } finally {
      this.sendHeld() // durable: whatever ends the loop, they are sent
      this.looping = false
    }
  }

  /** Sends the answers held for an operator's write (see the module comment), once. */
  private sendHeld(): void {
    const held = this.held
    this.held = null
    held?.()
  }

  /** Writes (see opts.write) with `backlog` background changes; a write that carries some restarts their interval. */
  private writeCarrying(whole: boolean, backlog: number): Promise<void> {
    if (backlog > 0) this.lastBacklogAt = performance.now()
    return this.opts.write(whole, whole ? Number.POSITIVE_INFINITY : backlog)
  }

  /**
   * How many background changes this round may write (0: none wait, or their interval has not passed).
   * After a failed background write the whole state waits, changes or not (its changes are lost to the deltas).
   */
  private backlogDue(): number {
    const pending = (this.opts.backlog?.() ?? 0) + (this.wholeNext ? 1 : 0)
    if (pending === 0 || this.stopped) return 0
    if (performance.now() - this.lastBacklogAt < (this.opts.backlogIntervalMs ?? DEFAULT_BACKLOG_INTERVAL_MS)) return 0
    return Math.min(pending, this.opts.maxBacklogPerWrite ?? DEFAULT_MAX_BACKLOG_PER_WRITE)
  }

  /** Background changes wait and no round runs: one round when their interval has passed. */
  private scheduleBacklog(): void {
    if (this.stopped || this.backlogTimer !== undefined || ((this.opts.backlog?.() ?? 0) === 0 && !this.wholeNext)) return
    const wait = Math.max(0, this.lastBacklogAt + (this.opts.backlogIntervalMs ?? DEFAULT_BACKLOG_INTERVAL_MS) - performance.now())
    this.backlogTimer = setTimeout(() => {
      this.backlogTimer = undefined
      this.kick()
    }, wait)
    this.backlogTimer.unref()
  }

  /** How long this round must wait before it may re-plan (0: it need not re-plan, or may now; see the module comment). */
  private replanWaitMs(): number {
    if (this.stopped || this.opts.needsSettle?.() !== true) return 0
    const interval = this.opts.settleIntervalMs ?? DEFAULT_SETTLE_INTERVAL_MS
    return Math.max(0, this.lastReplanAt + interval - performance.now())
  }

  private get waiting(): number {
    return this.urgent.length + this.queue.length
  }

  /** The next answers to release: operators' first, then nodes' in arrival order; at most one round's worth by default. */
  private takeQueue(limit = this.opts.maxAnswersPerRound ?? DEFAULT_MAX_ANSWERS_PER_ROUND): Waiter[] {
    const taken = this.urgent.length <= limit ? this.urgent : this.urgent.slice(0, limit)
    this.urgent = taken === this.urgent ? [] : this.urgent.slice(limit)
    const room = limit - taken.length
    if (room <= 0) return taken
    const nodes = this.queue.length <= room ? this.queue : this.queue.slice(0, room)
    this.queue = nodes === this.queue ? [] : this.queue.slice(room)
    return taken.length === 0 ? nodes : taken.concat(nodes)
  }

  private release(waiters: Waiter[]): void {
    for (const w of waiters) deliver(w, settleAnswer(w))
  }

  private recovered(): void {
    const failed = this.failures
    this.lastError = null
    this.failures = 0
    this.opts.onRecovered?.(failed)
  }

  private fail(err: Error): void {
    this.lastError = err
    this.wholeNext = true
    this.failures += 1
    this.opts.onFailure?.(err, this.failures)
    for (const w of this.takeQueue(Number.POSITIVE_INFINITY)) w.reject(unavailable())
    if (this.stopped) return
    const min = this.opts.retryMinMs ?? 100
    const max = this.opts.retryMaxMs ?? 2000
    const delay = Math.min(max, min * 2 ** Math.min(this.failures - 1, 16))
    clearTimeout(this.retryTimer)
    this.retryTimer = setTimeout(() => this.retry(), delay)
    this.retryTimer.unref()
  }

  private retry(): void {
    if (this.stopped || this.looping) return
    this.looping = true
    this.running = this.retryRounds()
  }

  // A retry writes even if nothing changed since: the failed write's changes are not durable yet.
  private async retryRounds(): Promise<void> {
    let version: number
    try {
      this.opts.settle()
      version = this.opts.version()
      await this.writeCarrying(true, Number.POSITIVE_INFINITY)
    } catch (err) {
      this.looping = false
      this.fail(err instanceof Error ? err : new Error(String(err)))
      return
    }
    this.wholeNext = false
    this.durable = version
    this.recovered()
    await this.writeRounds() // clears `looping` as it ends
  }
}

type Settled = { ok: true; value: unknown } | { ok: false; error: unknown }

function settleAnswer(w: Waiter): Settled {
  try {
    return { ok: true, value: w.compute() }
  } catch (error) {
    return { ok: false, error }
  }
}

function deliver(w: Waiter, answer: Settled): void {
  if (answer.ok) w.resolve(answer.value)
  else w.reject(answer.error)
}
