/**
 * Where the enrollment service comes from (SPEC "Device enrollment and renewal"): one for the life of the
 * process on the file store, or one per leadership term with HA (src/backends/ha-enroll-host.ts), loaded
 * from etcd when the term begins to serve, so a take-over loses no request and no issued certificate.
 */
import { DEFAULT_ENROLL_LIMITS, type EnrollLimits } from '../core/enroll-queue.js'
import type { EnrollStore, ProofSealer } from '../core/enroll-record.js'
import type { AuditSink } from '../audit/audit-sink.js'
import { EnrollService } from './enroll-service.js'

/** What every enrollment service is made with. */
export interface EnrollServiceParts {
  readonly now: () => number
  readonly audit: AuditSink
  readonly sealer: ProofSealer
  readonly caPem: string
  readonly planJwks: () => unknown
  readonly limits?: EnrollLimits
  readonly pollAfterMs?: number
}

/** The enrollment side of a running controller. */
export interface EnrollHost {
  /** Runs `op` on the service serving now; refuses with 503 (HA: not the leader, or still loading). */
  serve<T>(op: (service: EnrollService) => T | Promise<T>): Promise<T>
  /** Pending and held requests of the service serving now (zeros when none serves). */
  figures(): { pending: number; held: number }
}

/** The file store's host: one service, loaded at the start. */
export class SingleEnrollHost implements EnrollHost {
  private constructor(private readonly service: EnrollService) {}

  static async open(parts: EnrollServiceParts, store: EnrollStore): Promise<SingleEnrollHost> {
    return new SingleEnrollHost(await EnrollService.open({ ...parts, store }))
  }

  async serve<T>(op: (service: EnrollService) => T | Promise<T>): Promise<T> {
    return op(this.service)
  }

  figures(): { pending: number; held: number } {
    return this.service.figures()
  }
}

/** The queue limits a config asks for (the SPEC's total and times, the per-address and per-token shares configured). */
export function enrollLimits(perAddressPending: number, perTokenPending: number): EnrollLimits {
  return { ...DEFAULT_ENROLL_LIMITS, perSourcePending: perAddressPending, perTokenPending }
}
