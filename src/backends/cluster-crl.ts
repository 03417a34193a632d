/**
 * HA: the pushed CRL in every replica (SPEC "Operator view": kept where every replica finds it). Each
 * replica watches the cluster's copy in etcd, re-reads it every two seconds in case a watch event was
 * missed, and offers each new copy to its own CRL enforcement, which judges it by the usual rules (never
 * lower, signature, times). A leader's push is stored through here: fenced, and only over the copy it saw.
 *
 * The leader also publishes its own CRL in force when it is newer than the cluster's copy (a newer
 * `tls.crl` copied to that replica alone): otherwise, once it died, every other replica would refuse to
 * lead (the state records the highest CRL number ever installed, and theirs is lower) and the cluster
 * would stay without a leader, where no push can reach it.
 */
import type { Logger } from 'pino'
import { AppError } from '../errors.js'
import { parseCrl, type ParsedCrl } from '../identity/crl.js'
import { isNewerCrl } from '../identity/crl-decide.js'
import type { CrlOfferOutcome } from '../identity/crl-enforcement.js'
import type { PushedCrlStore, PushedCrlVersion } from '../service/pushed-crl-store.js'
import type { EtcdWatch } from '../ha/etcd-api.js'
import type { EtcdCrlStore } from '../ha/crl-store.js'
import type { Fence } from '../ha/leader-election.js'

export interface ClusterCrlOptions {
  readonly store: EtcdCrlStore
  /** Offers the cluster's copy to this replica's CRL enforcement (origin: cluster). */
  readonly offer: (pem: string) => CrlOfferOutcome
  /** The fence of the term that serves now; throws the 503 a request gets when this replica may not serve. */
  readonly servingFence: () => Fence
  readonly logger?: Logger | undefined
  /** Period of the re-read (default 2000 ms). */
  readonly pollMs?: number
  /** This replica's CRL in force: published by the leader when newer than the cluster's copy (see readAndOffer). */
  readonly inForce?: () => ParsedCrl
}

/** The stored copy parsed (without verifying: only its order against ours is read), or null when it does not parse. */
function parseStoredOrNull(pem: string): ParsedCrl | null {
  try {
    return parseCrl(pem)
  } catch {
    return null
  }
}

/** The cluster's pushed CRL, followed by one replica and written by its pushes while it leads. */
export class ClusterCrl implements PushedCrlStore {
  private watch: EtcdWatch | null = null
  private timer: NodeJS.Timeout | undefined
  /** The last copy offered with a final verdict: not offered again (a refusal is audited once). */
  private offered: string | null = null
  /**
   * The copy a push is writing now. Our own watch may deliver the write before the write's answer arrives
   * (seen under load): offered then, it would be installed as `cluster` and the push that follows would
   * find it in force, so the audit log would lose who pushed it. The push installs it itself.
   */
  private saving: string | null = null
  private inFlight: Promise<PushedCrlVersion> | null = null
  private again = false
  private loggedAt = -Infinity
  private stopped = false

  constructor(private readonly options: ClusterCrlOptions) {}

  /** Follows the cluster's copy from now on (called once the CRL enforcement acts). */
  follow(): void {
    if (this.timer !== undefined) return
    this.watch = this.options.store.watch(() => this.kick())
    this.timer = setInterval(() => this.kick(), this.options.pollMs ?? 2000)
    this.timer.unref()
    this.kick()
  }

  async stop(): Promise<void> {
    this.stopped = true // a read still under way offers nothing
    clearInterval(this.timer)
    await this.watch?.cancel()
    this.watch = null
  }

  /**
   * Reads the cluster's copy and offers it when it is new; resolves with its mod revision (null: none).
   * Concurrent calls share one read; a change meanwhile reads once more. Throws on etcd errors.
   */
  sync(): Promise<PushedCrlVersion> {
    if (this.inFlight !== null) {
      this.again = true // the read under way reads once more before it resolves
      return this.inFlight
    }
    this.inFlight = this.readAndOffer().finally(() => {
      this.inFlight = null
    })
    return this.inFlight
  }

  /** A push is taken by the leader only, once it has the cluster's copy in force (or an older one refused). */
  async prepare(): Promise<PushedCrlVersion> {
    this.options.servingFence()
    return this.sync()
  }

  async save(crl: ParsedCrl, version: PushedCrlVersion): Promise<void> {
    const fence = this.options.servingFence()
    this.saving = crl.pem
    let status: 'committed' | 'refused'
    try {
      status = await this.options.store.write(fence, crl.pem, version)
    } catch (err) {
      // etcd may have committed it all the same (the answer lost): the usual read offers whatever is stored
      this.saving = null
      this.kick()
      throw err
    }
    this.saving = null
    if (status === 'refused') {
      throw new AppError('unavailable', 'the cluster CRL changed meanwhile, or this controller stopped leading; nothing changed, retry')
    }
    // The push installs it next, as a push (audited with the operator): our own watch must not get there first.
    this.offered = crl.pem
  }

  notInstalled(pem: string): void {
    // the next poll (2 s) offers the cluster's copy again
    if (this.offered === pem) this.offered = null
  }

  private kick(): void {
    this.sync().catch((err: Error) => this.logThrottled(err))
  }

  private async readAndOffer(): Promise<PushedCrlVersion> {
    let stored
    do {
      this.again = false
      stored = await this.options.store.read()
      if (stored !== null && stored.pem !== this.offered && stored.pem !== this.saving && !this.stopped) {
        const outcome = this.options.offer(stored.pem)
        // thisUpdate still in the future here (this host's clock behind the leader's), or an install that
        // failed here (a transient TLS error): offered again next time, never taken as in force.
        const again = outcome.kind === 'not_yet_valid' || (outcome.kind === 'refused' && outcome.reason === 'install_failed')
        if (!again) this.offered = stored.pem
      }
    } while (this.again)
    // After a publish the key moved: a push prepared now must find the new revision.
    if (await this.publishNewer(stored)) stored = await this.options.store.read()
    return stored?.modRevision ?? null
  }

  /** While leading: puts this replica's CRL in force into etcd when the cluster's copy is older (or none). */
  private async publishNewer(stored: { readonly pem: string; readonly modRevision: string } | null): Promise<boolean> {
    const inForce = this.options.inForce?.()
    if (inForce === undefined || this.stopped) return false
    if (stored !== null && (stored.pem === inForce.pem || !isNewerCrl(parseStoredOrNull(stored.pem) ?? inForce, inForce))) return false
    let fence: Fence
    try {
      fence = this.options.servingFence()
    } catch {
      return false // not leading: the leader publishes
    }
    const status = await this.options.store.write(fence, inForce.pem, stored?.modRevision ?? null)
    if (status !== 'committed') return false // the key moved or the term ended: the next poll looks again
    this.offered = inForce.pem
    this.options.logger?.info({ crl_number: inForce.crlNumber?.toString() ?? null }, 'published the CRL in force (newer than the cluster copy) to etcd, so that every replica holds it')
    return true
  }

  /** etcd away (or the CRL side not started yet): one line every 5 s. */
  private logThrottled(err: Error): void {
    const now = performance.now()
    if (now - this.loggedAt < 5000) return
    this.loggedAt = now
    this.options.logger?.warn({ err: err.message }, 'reading the cluster CRL failed; retrying')
  }
}
