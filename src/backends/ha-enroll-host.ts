/**
 * The enrollment service with HA: one per leadership term, loaded from etcd the first time the term is
 * asked, writing under the term's fence. A replica that does not lead refuses as its state side does
 * (503 `not_leader` naming the leader, or `unavailable`).
 */
import { AppError } from '../errors.js'
import type { EtcdClient } from '../ha/etcd-api.js'
import { EtcdEnrollStore } from '../ha/enroll-store.js'
import { sameFence, type Fence } from '../ha/leader-election.js'
import { EnrollService } from '../service/enroll-service.js'
import type { EnrollHost, EnrollServiceParts } from '../service/enroll-host.js'

/** What the HA enroll host reads of its replica. */
export interface LeadingReplica {
  /** The fence of the term that serves now, or null. */
  servingFence(): Fence | null
  /** The refusal a request gets while this replica does not serve. */
  notServing(): AppError
}

export class HaEnrollHost implements EnrollHost {
  private term: { fence: Fence; service: Promise<EnrollService> } | null = null
  private loaded: EnrollService | null = null

  constructor(
    private readonly replica: LeadingReplica,
    private readonly client: EtcdClient,
    private readonly prefix: string,
    private readonly parts: EnrollServiceParts,
  ) {}

  async serve<T>(op: (service: EnrollService) => T | Promise<T>): Promise<T> {
    const fence = this.replica.servingFence()
    if (fence === null) throw this.replica.notServing()
    if (this.term === null || !sameFence(this.term.fence, fence)) {
      this.loaded = null
      const store = new EtcdEnrollStore(this.client, this.prefix, fence)
      const service = EnrollService.open({ ...this.parts, store })
      const term = { fence, service }
      this.term = term
      service.then(
        (s) => {
          if (this.term === term) this.loaded = s
        },
        () => {
          if (this.term === term) this.term = null // the next request loads again
        },
      )
    }
    const term = this.term
    let service: EnrollService
    try {
      service = await term.service
    } catch (err) {
      throw new AppError('unavailable', `the enrollment queue cannot be read from etcd right now (${(err as Error).message.slice(0, 120)}); retry`)
    }
    const answer = await op(service)
    const now = this.replica.servingFence()
    if (now === null || !sameFence(now, term.fence)) throw new AppError('unavailable', 'this controller stopped leading before it could answer; retry (another replica leads soon)')
    return answer
  }

  figures(): { pending: number; held: number } {
    const fence = this.replica.servingFence()
    if (fence === null || this.term === null || !sameFence(fence, this.term.fence) || this.loaded === null) return { pending: 0, held: 0 }
    return this.loaded.figures()
  }
}
