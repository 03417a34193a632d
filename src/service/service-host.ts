/**
 * Where the running controller's ControllerService comes from: one for the life of the process (the file
 * store, here), or one per leadership term (HA, src/backends/ha-backend.ts). The runtime, the routes and
 * the operations side see only a ServiceHost, never which store is behind it.
 */
import type { Logger } from 'pino'
import { Controller } from '../core/controller.js'
import type { DurableState } from '../core/durable-state.js'
import type { ControllerSettings } from '../core/types.js'
import type { ParsedCrl } from '../identity/crl.js'
import type { CrlOfferOutcome, CrlOrigin } from '../identity/crl-enforcement.js'
import type { PushedCrlStore } from './pushed-crl-store.js'
import type { StateStore } from '../state/state-store.js'
import type { AuditSink } from '../audit/audit-sink.js'
import { ControllerService, type ServiceApi } from './controller-service.js'
import type { EnrollHost, EnrollServiceParts } from './enroll-host.js'

/** The figures the metrics read (see ControllerService.figures). */
export type ServiceFigures = ReturnType<ControllerService['figures']>

/** The service side of a running controller. */
export interface ServiceHost {
  /** What the routes call; refuses with 503 while this replica may not serve (HA: not the leader). */
  readonly api: ServiceApi
  /** The service serving now, or null (HA: not leading, or still loading the state). */
  current(): ControllerService | null
  /** Whether this replica serves now (HA: leads with its state loaded; a standalone controller always). */
  isLeader(): boolean
  /** The current service's figures; zeros while none serves. */
  figures(): ServiceFigures
  /** Why state is not durable right now (a failed write not yet healed), or null. */
  readonly durabilityProblem: string | null
  /** Where a pushed CRL is kept (the state directory, or HA: etcd, written by the leader). */
  readonly crlStore: PushedCrlStore
  /** At stop, once the listener is closed: the last write, then the store (HA: the leadership) is released. */
  stop(): Promise<void>
}

/** What starting a service takes, after a restart and after an HA take-over alike. */
export interface ServiceStartDeps {
  readonly settings: ControllerSettings
  readonly now: () => number
  readonly audit: AuditSink
  readonly logger?: Logger | undefined
  /** True when a certificate serial is revoked by the CRL in force. */
  readonly isRevoked: (serial: string) => boolean
  /** The CRL in force (HA: a new term checks the state's CRL number against it, and records it). */
  readonly crlInForce: () => ParsedCrl
  /** Offers a CRL from elsewhere than the file to the CRL side (HA: the cluster's pushed copy). */
  readonly offerCrl?: (pem: string, origin: CrlOrigin) => CrlOfferOutcome
  /** Runs one state write (the metrics time it and count its failures). */
  readonly timeStateWrite?: (write: () => Promise<void>) => Promise<void>
  /** The duration (s) of a core call that re-planned (the metrics record it). */
  readonly observeReplan?: (seconds: number) => void
}

/** A state backend opened (the file store: and loaded) before anything is written; `start` begins serving. */
export interface StateBackend {
  /** Whether a saved state was restored at the start (null: not known yet, HA loads it per term). */
  readonly restored: boolean | null
  /** The CRL to start with: `tls.crl`, or the newer copy of a pushed CRL the backend kept (file store). */
  readonly startingCrl: StartingCrl
  start(deps: ServiceStartDeps): ServiceHost
  /** The enrollment side (after start): the state directory's queue, or with HA etcd's, per leadership term. */
  openEnroll(parts: EnrollServiceParts): Promise<EnrollHost>
}

/** The CRL a controller starts with and where it came from. */
export interface StartingCrl {
  readonly crl: ParsedCrl
  /** True when it is the pushed copy, newer than the `tls.crl` file (which then stays ignored until it is newer). */
  readonly pushed: boolean
}

const run = (write: () => Promise<void>) => write()
const NO_FIGURES: ServiceFigures = { generation: 0, totalShards: 0, live: 0, draining: 0, unassigned: 0, dailyBudgetRemaining: null, replans: 0, sessionsHeld: 0, restAllocatedPerSecond: null, restDemandPerSecond: null }

/**
 * A controller started from `state` (null: fresh) exactly as after a restart: leases count from now, every
 * Identify bucket counts as granted now, no shard moves; restored nodes whose certificate was revoked
 * meanwhile are removed.
 */
export function startService(deps: ServiceStartDeps, store: StateStore, state: DurableState | null): ControllerService {
  const { logger } = deps
  const controller = new Controller(deps.settings, state ? { state, now: deps.now() } : undefined)
  const service = new ControllerService(controller, {
    now: deps.now,
    audit: deps.audit,
    store: { write: (delta, full, whole) => (deps.timeStateWrite ?? run)(() => store.write(delta, full, whole)) },
    writes: {
      onFailure: (err, consecutive) => {
        // Every failure while it lasts would flood the log: the first, then every 10th.
        if (consecutive === 1 || consecutive % 10 === 0) {
          logger?.error({ err: err.message, consecutive }, 'state write failed: answering 503 unavailable until a retry succeeds')
        }
      },
      onRecovered: (failedWrites) => logger?.warn({ failedWrites }, 'state write succeeded again: serving'),
      onBackgroundFailure: (err, consecutive) => {
        if (consecutive === 1 || consecutive % 10 === 0) {
          logger?.warn({ err: err.message, consecutive }, 'state write of reported generations failed: serving on (no answer waited for it); the next write carries the whole state')
        }
      },
    },
    ...(deps.observeReplan === undefined ? {} : { observeReplan: deps.observeReplan }),
  })
  service.removeRevoked(deps.isRevoked)
  return service
}

/** The file store's host: one service, from the state loaded at the start, for the life of the process. */
export class SingleServiceHost implements ServiceHost {
  readonly api: ServiceApi

  constructor(
    private readonly service: ControllerService,
    private readonly store: StateStore,
    readonly crlStore: PushedCrlStore,
  ) {
    this.api = service
  }

  current(): ControllerService {
    return this.service
  }

  isLeader(): boolean {
    return true
  }

  figures(): ServiceFigures {
    return this.service.figures()
  }

  get durabilityProblem(): string | null {
    return this.service.durabilityProblem
  }

  async stop(): Promise<void> {
    await this.service.flushFinal()
    await this.store.close()
  }
}

/** Figures while no service serves (an HA follower). */
export function noFigures(): ServiceFigures {
  return NO_FIGURES
}
