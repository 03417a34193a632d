/**
 * Every metric the controller exports (SPEC "Operations endpoint"), on a registry of its own (never
 * prom-client's global one). Names carry their unit; label values come from fixed sets (route
 * patterns, HTTP statuses, error codes, normalized TLS reasons, roles), never a node ID or serial.
 *
 * On the hot path counters are plain tallies held per route and status (tally-counter.ts), and the
 * request and handshake durations go to plain histogram series (tally-histogram.ts); gauges of the
 * controller's state are read once per scrape, from the sources given to `bind`.
 */
import type { RestSettings } from '../core/types.js'
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { RequestOutcome } from '../http/request-outcome.js'
import type { Role } from '../identity/principal.js'
import type { ConnectionRefusal } from '../server/connection-caps.js'
import type { ControllerService } from '../service/controller-service.js'
import { collectProcessMetrics } from './process-metrics.js'
import { HANDSHAKE_FAILURE_REASONS, handshakeFailureReason } from './handshake-failure-reason.js'
import type { Readiness } from './readiness.js'
import { KeyedTally, TallyCounter, type Tally } from './tally-counter.js'
import { TallyHistogram, type HistogramSeries } from './tally-histogram.js'

/** The controller's state as the gauges read it. */
export type StateFigures = ReturnType<ControllerService['figures']>

/** What the scrape-time gauges read; every function must be cheap and change nothing observable. */
export interface MetricSources {
  figures(): StateFigures
  readiness(): Readiness
  isLeader(): boolean
  /** The nextUpdate of the CRL in force (null: the CRL has none). */
  crlNextUpdate(): Date | null
  serverCertExpiry(): Date
  refusedConnections(): Readonly<Record<ConnectionRefusal, number>>
  openConnections(): number
  /**
   * Admission under a reconnect storm: connections deferred so far, the cost per connection in use (ms),
   * the handshakes in flight and the event loop's utilization over the last window (0..1).
   */
  admission(): AdmissionView
  /** Enrollment and renewal requests waiting for the signer, and held in all (zeros when none serves). */
  enroll(): { readonly pending: number; readonly held: number }
}

/** Everything one scrape reports, read once so that the gauges agree with each other. */
interface ScrapeView {
  readonly figures: StateFigures
  readonly readiness: Readiness
  readonly isLeader: boolean
  readonly crlNextUpdate: Date | null
  readonly serverCertExpiry: Date
  readonly refused: Readonly<Record<ConnectionRefusal, number>>
  readonly openConnections: number
  readonly admission: AdmissionView
  readonly enroll: { readonly pending: number; readonly held: number }
}

/** What admission (server/admission.ts) shows of its state. */
export interface AdmissionView {
  readonly deferred: number
  readonly costMs: number
  readonly inFlight: number
  readonly loopUtilization: number
}

/** The route label of a request no route matched. */
export const UNMATCHED_ROUTE = 'unmatched'
const IDENTIFY_RESULTS = ['granted', 'resumed', 'bucket_busy', 'handoff_pending', 'daily_limit', 'not_owner'] as const
const ROLES: readonly Role[] = ['node', 'operator', 'signer']
const REFUSALS: readonly ConnectionRefusal[] = ['max_connections_per_address', 'max_connections']
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const WRITE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
/** From 1 ms (a resumed handshake on an idle controller) to a client's 10 s time-out. */
const HANDSHAKE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const REPLAN_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]

/** What a request to one route touches, made once per route. */
interface RouteSeries {
  readonly duration: HistogramSeries
  readonly byStatus: Map<number, Tally>
  /** Check-ins or Identify claims by result, for those two routes. */
  readonly results: KeyedTally<'result'> | null
}

/** The controller's registry and the hooks that move its metrics. */
export class ControllerMetrics {
  /** The registry /metrics serves. */
  readonly registry = new Registry()
  private view: ScrapeView | null = null
  private sources: MetricSources | null = null
  private readonly routes = new Map<string, RouteSeries>()
  private readonly requests: TallyCounter<'route' | 'status'>
  private readonly requestDuration: TallyHistogram<'route'>
  private readonly checkins: KeyedTally<'result'>
  private readonly identifyClaims: KeyedTally<'result'>
  private readonly handshakeFailures: KeyedTally<'reason'>
  private readonly rateLimitedByRole: KeyedTally<'role'>
  private readonly stateWriteDuration: Histogram
  private readonly stateWriteFailures: Counter
  private readonly replanDuration: Histogram
  private readonly handshakeDuration: HistogramSeries

  /** The deployment's fixed settings: total shards, and the daily Identify budget (its gauges exist only with one). */
  constructor(settings: { readonly totalShards: number; readonly dailyIdentifyLimit: number | null; readonly rest?: RestSettings }) {
    const registers = [this.registry]
    collectProcessMetrics(this.registry)
    this.requests = new TallyCounter({ name: 'pxe_requests_total', help: 'mTLS API requests answered, by route pattern and HTTP status', labelNames: ['route', 'status'], registers })
    this.requestDuration = new TallyHistogram({ name: 'pxe_request_duration_seconds', help: 'Time from request start to the answer, by route pattern', labelNames: ['route'], buckets: REQUEST_BUCKETS, registers })
    const keyed = <L extends string>(name: string, help: string, label: L, initial: readonly string[]) =>
      new KeyedTally(new TallyCounter({ name, help, labelNames: [label], registers }), label, initial)
    this.checkins = keyed('pxe_checkins_total', 'Check-ins answered, by result (ok or the error code)', 'result', ['ok'])
    this.identifyClaims = keyed('pxe_identify_claims_total', 'Identify claims answered, by result (granted, resumed: a held session handed out, the wait reason, or the error code)', 'result', IDENTIFY_RESULTS)
    this.handshakeFailures = keyed('pxe_tls_handshake_failures_total', 'Refused TLS handshakes on the mTLS listener, by normalized reason', 'reason', HANDSHAKE_FAILURE_REASONS)
    this.rateLimitedByRole = keyed('pxe_rate_limited_total', 'Requests refused with 429 rate_limited, by role', 'role', ROLES)
    this.stateWriteDuration = new Histogram({ name: 'pxe_state_write_duration_seconds', help: 'Duration of durable state writes (successful or not)', buckets: WRITE_BUCKETS, registers })
    this.stateWriteFailures = new Counter({ name: 'pxe_state_write_failures_total', help: 'State writes that failed (answers get 503 until a retry succeeds)', registers })
    this.replanDuration = new Histogram({ name: 'pxe_replan_duration_seconds', help: 'Main-thread time of each controller operation that re-planned (a batch of joins, an expiry, a drain, a revocation)', buckets: REPLAN_BUCKETS, registers })
    this.handshakeDuration = new TallyHistogram({ name: 'pxe_tls_handshake_duration_seconds', help: 'Time from accepting a connection (admitted, not deferred) to its completed TLS handshake', buckets: HANDSHAKE_BUCKETS, labelNames: [], registers }).series({})
    this.registerGauges(settings.totalShards, settings.dailyIdentifyLimit, settings.rest ?? null)
  }

  /** One operation that re-planned took `seconds` of the main thread. */
  observeReplan(seconds: number): void {
    this.replanDuration.observe(seconds)
  }

  /** Connects the scrape-time gauges to the running controller. */
  bind(sources: MetricSources): void {
    this.sources = sources
  }

  /** The Prometheus text exposition of every metric, read at one moment. */
  async text(): Promise<string> {
    const s = this.sources
    this.view = s === null ? null : {
      figures: s.figures(),
      readiness: s.readiness(),
      isLeader: s.isLeader(),
      crlNextUpdate: s.crlNextUpdate(),
      serverCertExpiry: s.serverCertExpiry(),
      refused: s.refusedConnections(),
      openConnections: s.openConnections(),
      admission: s.admission(),
      enroll: s.enroll(),
    }
    return this.registry.metrics()
  }

  /** The content type of `text()`. */
  get contentType(): string {
    return this.registry.contentType
  }

  /** One answered request (fastify's onResponse): `route` is the matched pattern, undefined if none. */
  observeRequest(route: string | undefined, status: number, elapsedMs: number, outcome: RequestOutcome | null): void {
    const name = route ?? UNMATCHED_ROUTE
    const series = this.routeSeries(name)
    let tally = series.byStatus.get(status)
    if (tally === undefined) {
      tally = this.requests.tally({ route: name, status: String(status) })
      series.byStatus.set(status, tally)
    }
    tally.value += 1
    series.duration.observe(elapsedMs / 1000)
    series.results?.inc(outcome ?? (status < 400 ? 'ok' : 'other'))
  }

  /** An admitted connection completed its TLS handshake `seconds` after it was accepted. */
  handshakeDone(seconds: number): void {
    this.handshakeDuration.observe(seconds)
  }

  /** A refused handshake; `code` is the OpenSSL verify code or Node's error code. */
  handshakeFailed(code: string | undefined): void {
    this.handshakeFailures.inc(handshakeFailureReason(code))
  }

  /** A request refused by the per-principal rate limit. */
  rateLimited(role: Role): void {
    this.rateLimitedByRole.inc(role)
  }

  /** Runs one state write, recording its duration (and its failure). */
  async timeStateWrite<T>(write: () => Promise<T>): Promise<T> {
    const start = performance.now()
    try {
      return await write()
    } catch (err) {
      this.stateWriteFailures.inc()
      throw err
    } finally {
      this.stateWriteDuration.observe((performance.now() - start) / 1000)
    }
  }

  private routeSeries(route: string): RouteSeries {
    let series = this.routes.get(route)
    if (series === undefined) {
      const results = route === '/v1/checkin' ? this.checkins : route === '/v1/identify' ? this.identifyClaims : null
      series = { duration: this.requestDuration.series({ route }), byStatus: new Map(), results }
      this.routes.set(route, series)
    }
    return series
  }

  private registerGauges(totalShards: number, dailyLimit: number | null, rest: RestSettings | null): void {
    const registers = [this.registry]
    const viewNow = () => this.view
    const gauge = (name: string, help: string, read: (v: ScrapeView) => number | null) =>
      new Gauge({
        name,
        help,
        registers,
        collect(this: Gauge) {
          const v = viewNow()
          const value = v === null ? null : read(v)
          if (value !== null) this.set(value)
        },
      })
    gauge('pxe_plan_generation', 'Current plan generation (monotonic for the deployment)', (v) => v.figures.generation)
    gauge('pxe_nodes_live', 'Nodes with a live lease', (v) => v.figures.live)
    gauge('pxe_nodes_draining', 'Live nodes set draining by an operator', (v) => v.figures.draining)
    // What the leader runs (a live reshard's switch changes it); the configured count where no service serves (a follower).
    const shards = (v: ScrapeView) => (v.figures.totalShards > 0 ? v.figures.totalShards : totalShards)
    gauge('pxe_shards', 'Shards of the deployment (total_shards)', shards)
    // The contract's name for the same gauge, kept for what reads it (promtool frowns on _total on a gauge).
    gauge('pxe_shards_total', 'Shards of the deployment (total_shards); the same value as pxe_shards', shards)
    gauge('pxe_shards_unassigned', 'Shards no live node is assigned', (v) => v.figures.unassigned)
    gauge('pxe_enroll_requests_pending', 'Enrollment and renewal requests waiting for the signer (pxe-pki signer); at most 10,000', (v) => v.enroll.pending)
    gauge('pxe_sessions_held', 'Deposited sessions held for the next owner of their shard (memory only, at most session_handoff.ttl_seconds)', (v) => v.figures.sessionsHeld)
    if (dailyLimit !== null) {
      gauge('pxe_identify_daily_budget_remaining', 'Identify grants left in the rolling 24-hour budget', (v) => v.figures.dailyBudgetRemaining)
      gauge('pxe_identify_daily_budget_limit', 'The configured daily Identify budget (daily_identify_limit)', () => dailyLimit)
    }
    if (rest !== null) {
      // SPEC "REST budget": what the shares in force hand out never exceeds the safe budget; demand above it is held back on the nodes.
      gauge('pxe_rest_budget_per_second', 'The safe REST budget shared among nodes (rest.global_per_second x rest.safety)', () => Math.floor(rest.globalPerSecond * rest.safety * 100 + 1e-9) / 100)
      gauge('pxe_rest_allocated_per_second', 'Sum of the REST shares in force (requests per second; at most pxe_rest_budget_per_second)', (v) => v.figures.restAllocatedPerSecond)
      gauge('pxe_rest_demand_per_second', 'Sum of the REST demand the live nodes last reported (requests per second, including what their proxies held back)', (v) => v.figures.restDemandPerSecond)
    }
    // No nextUpdate means the CRL never goes stale: +Inf keeps "time() > next update" alerts quiet.
    gauge('pxe_crl_next_update_timestamp_seconds', 'nextUpdate of the CRL in force (Unix seconds)', (v) => (v.crlNextUpdate === null ? Infinity : v.crlNextUpdate.getTime() / 1000))
    gauge('pxe_server_cert_expiry_timestamp_seconds', 'notAfter of the mTLS server certificate (Unix seconds)', (v) => v.serverCertExpiry.getTime() / 1000)
    gauge('pxe_is_leader', '1 while this controller serves nodes (always 1 without HA)', (v) => (v.isLeader ? 1 : 0))
    gauge('pxe_ready', '1 while /readyz answers 200', (v) => (v.readiness.ready ? 1 : 0))
    gauge('pxe_tls_connections_open', 'Open mTLS connections (handshake done)', (v) => v.openConnections)
    gauge('pxe_connection_cost_seconds', 'Event-loop time one new connection costs (handshake and request), as admission measures it', (v) => v.admission.costMs / 1000)
    // With the cost, what admission decides from: in flight x cost is the queue it holds against its budget.
    gauge('pxe_tls_handshakes_in_flight', 'Admitted connections whose TLS handshake has not ended (the queue admission counts)', (v) => v.admission.inFlight)
    gauge('pxe_event_loop_utilization_ratio', "Share of admission's last window (nominally 250 ms, longer when the loop runs late) the event loop was busy (0..1); 0 until the first window ends", (v) => v.admission.loopUtilization)
    new Counter({
      name: 'pxe_connections_deferred_total',
      help: 'Connections answered "busy, come back later" at accept time, before any TLS work (a reconnect storm)',
      registers,
      collect(this: Counter) {
        const v = viewNow()
        this.reset()
        this.inc(v === null ? 0 : v.admission.deferred)
      },
    })
    // The caps count refusals themselves (src/server/connection-caps.ts): the counter mirrors their totals.
    new Counter({
      name: 'pxe_connections_refused_total',
      help: 'Connections dropped at accept time by the connection caps, by reason',
      labelNames: ['reason'],
      registers,
      collect(this: Counter<'reason'>) {
        const v = viewNow()
        for (const reason of REFUSALS) {
          this.remove(reason)
          this.labels(reason).inc(v === null ? 0 : v.refused[reason])
        }
      },
    })
  }
}
