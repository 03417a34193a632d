/**
 * HA mode (SPEC "High availability"): every replica campaigns; the leader serves from a controller started
 * from the state in etcd exactly as after a restart (leases and Identify buckets count from the take-over,
 * no shard moves, the generation continues), and followers refuse node and operator requests with 503
 * `not_leader` naming the leader. A term ends when the leadership does (renew deadline, fence refused,
 * key lost): from that moment every request gets 503 `unavailable`, the term's controller is dropped, and
 * the replica campaigns again; a new term reloads the state from etcd.
 *
 * Every answer is checked twice: before the controller acts and again when its answer is ready (after the
 * write that covers it committed), each time with the renew deadline checked synchronously, so a replica
 * frozen past its deadline never answers from memory.
 */
import type { Logger } from 'pino'
import type { DurableState } from '../core/durable-state.js'
import { AppError } from '../errors.js'
import { assertNotRolledBack } from '../identity/crl-startup.js'
import type { ControllerService, ServiceApi } from '../service/controller-service.js'
import { noFigures, startService, type ServiceFigures, type ServiceHost, type ServiceStartDeps, type StateBackend } from '../service/service-host.js'
import { JournaledFileStore } from '../state/journaled-file-store.js'
import { StateFileError } from '../state/state-file-error.js'
import type { EtcdClient } from '../ha/etcd-api.js'
import { connectEtcd } from '../ha/etcd-client.js'
import { ThreadLeaseKeeper } from '../ha/lease-keeper.js'
import { EtcdStateStore } from '../ha/etcd-state-store.js'
import { DEFAULT_ETCD_LIMITS } from '../ha/etcd-limits.js'
import type { HaConfig } from '../ha/ha-config.js'
import { EtcdStateError, type FencedWriteRefused } from '../ha/ha-errors.js'
import { Leadership, sameFence, type Fence, type StepDownReason } from '../ha/leader-election.js'
import { EtcdCrlStore } from '../ha/crl-store.js'
import { EtcdTicketKeyStore } from '../ha/ticket-key-store.js'
import type { TicketKeyStoreAccess } from '../server/shared-ticket-keys.js'
import type { ParsedCrl } from '../identity/crl.js'
import { CrlSideNotStarted } from '../identity/crl-enforcement.js'
import { ClusterCrl } from './cluster-crl.js'
import { HaEnrollHost } from './ha-enroll-host.js'

/** What the HA host needs besides what every service needs. */
export interface HaHostOptions {
  readonly ha: HaConfig
  readonly controllerId: string
  readonly client: EtcdClient
  /** The configured CRL file (for the rollback message). */
  readonly crlPath: string
  /** The state to start from when etcd holds none (state_dir with ha: moving one controller to HA). */
  readonly seed?: (() => Promise<DurableState | null>) | undefined
  readonly logger?: Logger | undefined
}

/** One leadership term: its fence, its store, and its service once the state is loaded. */
interface Term {
  readonly fence: Fence
  readonly store: EtcdStateStore
  service: ControllerService | null
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A replica in an HA deployment: campaigns from start until stop, serves while it leads. */
export class HaServiceHost implements ServiceHost {
  readonly api: ServiceApi
  /** The pushed CRL in etcd: followed by every replica, written by the leader's pushes. */
  readonly crlStore: ClusterCrl
  private readonly leadership: Leadership
  /** Renews the lease on its own thread: a loop busy with a fleet must not cost the leader its term. */
  private readonly keeper: ThreadLeaseKeeper
  private term: Term | null = null
  /** Operations per transaction: the config's max_txn_ops, lowered for good once etcd refused a count. */
  private maxTxnOps: number
  private readonly errorsLoggedAt = new Map<string, number>()

  constructor(
    private readonly options: HaHostOptions,
    private readonly deps: ServiceStartDeps,
  ) {
    const { ha, controllerId, client } = options
    this.maxTxnOps = ha.maxTxnOps
    this.keeper = new ThreadLeaseKeeper(ha.etcd)
    // Started now, so that it runs by the time this replica leads (until then this thread renews: lease-session.ts).
    this.keeper.ready().catch(() => undefined)
    this.leadership = new Leadership({
      client,
      keeper: this.keeper,
      prefix: ha.prefix,
      controllerId,
      leaseTtlSeconds: ha.leaseTtlSeconds,
      events: {
        onStartedLeading: (fence) => void this.beginTerm(fence),
        onStoppedLeading: (reason) => this.endTerm(reason),
        onNewLeader: (id) => options.logger?.info({ leader: id }, id === null ? 'no leader' : `the leader is ${id}`),
        onError: (err, during) => this.logThrottled(during, err),
      },
    })
    const offerCrl = deps.offerCrl
    this.crlStore = new ClusterCrl({
      store: new EtcdCrlStore(client, ha.prefix),
      offer: (pem) => {
        if (offerCrl === undefined) throw new Error('HA needs offerCrl to follow the cluster CRL')
        return offerCrl(pem, { source: 'cluster' })
      },
      servingFence: () => {
        const term = this.servingTerm()
        if (term === null) throw this.refusal()
        return term.fence
      },
      logger: options.logger,
      inForce: () => deps.crlInForce(),
    })
    this.api = {
      checkIn: (body, cert) => this.serve((s) => s.checkIn(body, cert)),
      claimIdentify: (body, serial) => this.serve((s) => s.claimIdentify(body, serial)),
      route: (guildId) => this.serve((s) => s.route(guildId)),
      plan: () => this.serve((s) => s.plan()),
      setDraining: (nodeId, draining, operator, force) => this.serve((s) => s.setDraining(nodeId, draining, operator, force)),
      startReshard: (totalShards, operator) => this.serve((s) => s.startReshard(totalShards, operator)),
      abortReshard: (operator) => this.serve((s) => s.abortReshard(operator)),
    }
  }

  /** Starts campaigning. */
  start(): this {
    this.leadership.start()
    return this
  }

  current(): ControllerService | null {
    return this.servingTerm()?.service ?? null
  }

  isLeader(): boolean {
    return this.servingTerm() !== null
  }

  figures(): ServiceFigures {
    return this.current()?.figures() ?? noFigures()
  }

  get durabilityProblem(): string | null {
    return this.current()?.durabilityProblem ?? null
  }

  /** A leader writes its state once more, then steps down (its lease revoked: another leads at once). */
  async stop(): Promise<void> {
    const service = this.current()
    if (service !== null) {
      await service.flushFinal().catch((err: Error) => this.options.logger?.warn({ err: err.message }, 'stop: the last state write failed (no longer leading?)'))
    }
    await this.crlStore.stop()
    await this.leadership.close()
    await this.keeper.close()
    this.options.client.close()
  }

  /** The fence of the term that serves now, or null (the shared ticket keys are written under it). */
  servingFence(): Fence | null {
    return this.servingTerm()?.fence ?? null
  }

  /** The term that may serve now: leading (renew deadline checked now), under the term's fence, state loaded. */
  private servingTerm(): (Term & { service: ControllerService }) | null {
    const term = this.term
    const fence = this.leadership.fence()
    if (term === null || term.service === null || fence === null || !sameFence(fence, term.fence)) return null
    return term as Term & { service: ControllerService }
  }

  /**
   * Runs a request on the term's service; refuses with 503 when no term serves, and again when the term
   * ended before the answer was ready. Synchronous refusals of the service stay synchronous (audited by the caller).
   */
  private serve<T>(op: (service: ControllerService) => Promise<T>): Promise<T> {
    // A request is life: a loop turn that serves requests for longer than the TTL is busy, not stuck (lease-keeper.ts).
    this.keeper.showLife()
    const term = this.servingTerm()
    if (term === null) throw this.refusal()
    return op(term.service).then((answer) => {
      if (this.servingTerm() !== term) throw new AppError('unavailable', 'this controller stopped leading before it could answer; retry (another replica leads soon)')
      return answer
    })
  }

  /** The refusal of a request while this replica does not serve (the enrollment side answers the same). */
  notServing(): AppError {
    return this.refusal()
  }

  private refusal(): AppError {
    if (this.leadership.isLeader) return new AppError('unavailable', 'this controller was just elected leader and is loading the state; retry shortly')
    const leader = this.leadership.leaderId
    if (leader !== null && leader !== this.options.controllerId) {
      return new AppError('not_leader', `this controller is not the leader; the leader is ${leader.slice(0, 128)}`)
    }
    return new AppError('unavailable', 'no controller leads right now (an election is under way); retry shortly')
  }

  /** Elected: load the state at one revision and start a controller as after a restart. */
  private async beginTerm(fence: Fence): Promise<void> {
    const { ha, client, controllerId, logger } = this.options
    const store = new EtcdStateStore({
      client,
      prefix: ha.prefix,
      fence,
      limits: { ...DEFAULT_ETCD_LIMITS, maxTxnOps: this.maxTxnOps },
      currentFence: () => this.leadership.fence(),
      onRefused: (err) => this.refused(err),
      onTxnOpsLowered: (from, to, err) => {
        this.maxTxnOps = Math.min(this.maxTxnOps, to)
        logger?.warn({ err: err.message, from, to }, `etcd refused a transaction of more operations than its --max-txn-ops: writing at most ${to} per transaction from now on (set ha.etcd.max_txn_ops to the members' --max-txn-ops)`)
      },
    })
    const term: Term = { fence, store, service: null }
    this.term = term
    let state: DurableState | null
    try {
      const loaded = await this.loadState(term)
      if (loaded === undefined) return // the term ended while loading
      state = loaded
      // The cluster's pushed CRL first: the state may record its number, and a leader must enforce it.
      if (!(await this.syncCrl(term))) return
      assertNotRolledBack(this.deps.crlInForce(), state?.meta.crlNumber ?? undefined, this.options.crlPath)
    } catch (err) {
      // the state in etcd (or the seed) is unusable, or our CRL is older than the deployment's: let another replica lead
      logger?.error({ err: (err as Error).message }, 'cannot serve as leader: stepping down for two lease TTLs')
      if (this.term === term) this.leadership.resign(2 * ha.leaseTtlSeconds * 1000)
      return
    }
    if (this.term !== term) return
    const service = startService(this.deps, store, state)
    const crlNumber = this.deps.crlInForce().crlNumber
    if (crlNumber !== null) service.recordCrlNumber(crlNumber)
    term.service = service
    const generation = service.figures().generation
    this.deps.audit.record('leader_elected', { controller_id: controllerId, generation, restored: state !== null, election_key: fence.key, election_revision: fence.createRevision })
    logger?.info({ generation, restored: state !== null }, 'leading: serving from the state in etcd')
  }

  /** The state in etcd (or the seed when etcd has none); transient errors are retried while the term lasts. */
  private async loadState(term: Term): Promise<DurableState | null | undefined> {
    for (let attempt = 0; this.term === term; attempt++) {
      try {
        const state = await term.store.load()
        return state ?? (await this.options.seed?.()) ?? null
      } catch (err) {
        // A damaged state (in etcd, or the file store seeding it) is final: retrying cannot mend it.
        if (err instanceof EtcdStateError || err instanceof StateFileError) throw err
        this.logThrottled('load', err as Error)
        await sleep(Math.min(100 * 2 ** attempt, 1000))
      }
    }
    return undefined
  }

  /** Brings the CRL in force up to the cluster's copy, retrying while the term lasts; false when it ended. */
  private async syncCrl(term: Term): Promise<boolean> {
    for (let attempt = 0; this.term === term; attempt++) {
      try {
        await this.crlStore.sync()
        return true
      } catch (err) {
        // etcd away, or (a term begun during the start) the CRL side not acting yet: retried either way
        if (!(err instanceof CrlSideNotStarted)) this.logThrottled('crl', err as Error)
        await sleep(Math.min(100 * 2 ** attempt, 1000))
      }
    }
    return false
  }

  /** The leadership ended: 503 from now on, the term's controller dropped (a new term reloads). */
  private endTerm(reason: StepDownReason): void {
    const term = this.term
    this.term = null
    this.options.logger?.warn({ reason }, 'no longer leading: answering 503 until a new term')
    const service = term?.service
    if (!service) return // it never served (still loading): nothing to drop, nothing was audited
    service.abandon()
    this.deps.audit.record('leader_lost', { controller_id: this.options.controllerId, reason, generation: service.figures().generation, election_key: term.fence.key })
  }

  /** etcd refused a write: another replica may lead. Audited, then this term ends at once. */
  private refused(err: FencedWriteRefused): void {
    this.deps.audit.record('fenced_write_refused', {
      controller_id: this.options.controllerId,
      election_key: err.fence.key,
      revision: err.revision,
      committed_transactions: err.committedTransactions,
    })
    this.leadership.fenceRefused(err.fence)
  }

  /** etcd errors repeat while etcd is away: one log line per kind every 5 s. */
  private logThrottled(kind: string, err: Error): void {
    const now = performance.now()
    if (now - (this.errorsLoggedAt.get(kind) ?? -Infinity) < 5000) return
    this.errorsLoggedAt.set(kind, now)
    this.options.logger?.warn({ err: err.message, during: kind }, 'etcd call failed')
  }
}

/** What opening the HA backend takes from the config. */
export interface HaBackendConfig {
  readonly ha: HaConfig
  readonly controllerId: string
  /** state_dir with ha: read once to seed an empty etcd, never written. */
  readonly stateDir: string | null
  readonly crlPath: string
  /** The `tls.crl` file's CRL: the start's (the cluster's pushed copy follows once the replica runs). */
  readonly crl: ParsedCrl
}

/**
 * Connects to etcd (the PEM files are read and checked now: a bad one stops the start); `start` creates the
 * replica and begins campaigning.
 */
export async function openHaBackend(config: HaBackendConfig, logger?: Logger): Promise<StateBackend & { readonly ticketKeyStore: TicketKeyStoreAccess }> {
  const client = await connectEtcd(config.ha.etcd)
  const { stateDir } = config
  const seed = stateDir === null ? undefined : () => new JournaledFileStore(stateDir).load()
  let host: HaServiceHost | null = null
  const keyStore = new EtcdTicketKeyStore(client, config.ha.prefix)
  return {
    restored: null,
    startingCrl: { crl: config.crl, pushed: false },
    // The replicas' shared TLS session-ticket keys: only a leader's write is tried, under its term's fence.
    ticketKeyStore: {
      read: (timeoutMs) => keyStore.read(timeoutMs),
      write: async (record, expected) => {
        const fence = host?.servingFence() ?? null
        return fence === null ? 'not_leading' : keyStore.write(fence, record, expected)
      },
      watch: (onChange) => keyStore.watch(onChange),
    },
    start: (deps) => (host = new HaServiceHost({ ha: config.ha, controllerId: config.controllerId, client, crlPath: config.crlPath, seed, logger }, deps).start()),
    openEnroll: async (parts) => {
      const replica = host
      if (replica === null) throw new Error('openEnroll before start')
      return new HaEnrollHost({ servingFence: () => replica.servingFence(), notServing: () => replica.notServing() }, client, config.ha.prefix, parts)
    },
  }
}
