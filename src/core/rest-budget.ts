/**
 * One bot-wide REST rate limit shared among the nodes (SPEC "REST budget"). Discord counts a bot's REST
 * requests across all its processes; each node is answered with a share of `global_per_second × safety`
 * and of the invalid-request budget, by max-min fairness of the demands the nodes report.
 *
 * The invariant: the shares in force never sum above the safe budget, also while they change. A share is
 * in force from the answer that carries it until its `until` (the node's lease end), or until a later
 * answer to the same node replaces it. A lowered share is in force once answered; a raised one is granted
 * only out of what the shares in force leave free, so a node whose fair share grew gets the rest at its
 * next check-in after the others' lowered shares were answered (or their leases ran out). A node that
 * leaves is answered with no share; a revoked or expired node's last share stays counted until its `until`.
 *
 * After a restart or a failover the controller does not know what its predecessor handed out: until one
 * lease has passed, that unknown part is counted as the whole budget, less what each node reports it
 * holds (`rest_demand.held`) at its first check-in. Pure: the clock is passed in.
 */
import type { RestDemandBody } from './schemas.js'
import { spreadReserve, waterFill } from './rest-shares.js'
import type { RestBudgetView, RestNodeView, RestSettings } from './types.js'

/** A share answered to a node: hundredths of a request per second, invalid requests per 10 minutes, and its end. */
export interface RestShare {
  readonly centiPerSecond: number
  readonly invalidBudget: number
  readonly untilMs: number
}

/** What a node reported (SPEC "REST budget"), in the units shares are counted in. */
interface Demand {
  readonly centiPerSecond: number
  readonly invalid10m: number
}

/** What the budget needs of the controller: who is live and who drains. */
export interface RestBudgetHost {
  readonly live: ReadonlyMap<string, unknown>
  readonly draining: ReadonlySet<string>
}

/** A node with no demand keeps this floor (1 request per second, in hundredths). */
const FLOOR_CENTI = 100
/** Targets are recomputed at most this often for demand changes (a join recomputes at once): O(N log N). */
const RECOMPUTE_MS = 1000

const NO_SHARE: RestShare = Object.freeze({ centiPerSecond: 0, invalidBudget: 0, untilMs: 0 })

export class RestBudget {
  /** The safe budgets: hundredths of a request per second, and invalid requests per 10 minutes. */
  readonly centiBudget: number
  readonly invalidBudget: number
  private readonly demands = new Map<string, Demand>()
  /** Shares in force, in `until` order (a renewed share moves to the back: untils grow with the clock). */
  private readonly inForce = new Map<string, RestShare>()
  private centiInForce = 0
  private invalidInForce = 0
  private targets = new Map<string, { centi: number; invalid: number }>()
  private computedAt = Number.NEGATIVE_INFINITY
  /** How many nodes were live at the last recompute: a departure changes it. */
  private liveAtCompute = -1
  /** After a restore: what the previous controller may have handed out, until `unknownUntil`. */
  private unknownCenti = 0
  private unknownInvalid = 0
  private unknownUntil = Number.NEGATIVE_INFINITY
  /** Nodes answered (or that reported what they hold) since the restore: their held share is no longer unknown. */
  private readonly answeredSinceRestore = new Set<string>()

  constructor(
    private readonly settings: RestSettings,
    private readonly host: RestBudgetHost,
  ) {
    this.centiBudget = Math.floor(settings.globalPerSecond * settings.safety * 100 + 1e-9)
    this.invalidBudget = Math.floor(settings.invalidPer10Minutes * settings.safety + 1e-9)
  }

  /** A restored controller (restart, failover): the previous one's shares are unknown for one lease. */
  restored(now: number, leaseMs: number): void {
    this.unknownCenti = this.centiBudget
    this.unknownInvalid = this.invalidBudget
    this.unknownUntil = now + leaseMs
  }

  /** A live node's accepted check-in: its demand, and what it says it holds (used only after a restore). */
  report(now: number, nodeId: string, demand: RestDemandBody): void {
    const known = this.demands.get(nodeId)
    // whole hundredths, rounding a float's 28.44 × 100 = 2843.9999999999995 to 2844 before the ceiling
    const centiPerSecond = Math.ceil(Math.round(demand.per_second * 100_000) / 1000)
    if (known === undefined || known.centiPerSecond !== centiPerSecond || known.invalid10m !== demand.invalid_10m) {
      this.demands.set(nodeId, { centiPerSecond, invalid10m: demand.invalid_10m })
    }
    if (demand.held !== undefined && now < this.unknownUntil && !this.answeredSinceRestore.has(nodeId)) {
      // Its predecessor's share to this node is now known: it leaves the unknown part, and this node's
      // answer replaces it (counted in inForce from then on). Once answered here, what it holds is ours.
      this.answeredSinceRestore.add(nodeId)
      this.unknownCenti = Math.max(0, this.unknownCenti - Math.floor(demand.held.per_second * 100 + 1e-9))
      this.unknownInvalid = Math.max(0, this.unknownInvalid - demand.held.invalid_budget)
    }
  }

  /** A node answered with no share (it left on purpose, or reports no demand: no proxy): its share ends with the answer. */
  withdraw(nodeId: string): void {
    this.end(nodeId)
    this.answeredSinceRestore.add(nodeId)
    this.demands.delete(nodeId)
  }

  /**
   * The share a live node is answered with at `now`, in force until `untilMs`: its fair target, as far as
   * the shares in force of the others leave room.
   */
  shareFor(now: number, nodeId: string, untilMs: number): RestShare {
    this.expire(now)
    if (!this.host.live.has(nodeId)) {
      this.withdraw(nodeId)
      return NO_SHARE
    }
    // a join or departure recomputes at once (this node is new to the targets, or one of them left)
    if (!this.targets.has(nodeId) || this.targets.size !== this.demands.size || this.liveAtCompute !== this.host.live.size || now - this.computedAt >= RECOMPUTE_MS) {
      this.recompute(now)
    }
    const target = this.targets.get(nodeId)!
    const mine = this.inForce.get(nodeId)
    const unknown = now < this.unknownUntil
    const freeCenti = this.centiBudget - (this.centiInForce - (mine?.centiPerSecond ?? 0)) - (unknown ? this.unknownCenti : 0)
    const freeInvalid = this.invalidBudget - (this.invalidInForce - (mine?.invalidBudget ?? 0)) - (unknown ? this.unknownInvalid : 0)
    const share: RestShare = {
      centiPerSecond: Math.max(0, Math.min(target.centi, freeCenti)),
      invalidBudget: Math.max(0, Math.min(target.invalid, freeInvalid)),
      untilMs,
    }
    this.end(nodeId)
    if (unknown) this.answeredSinceRestore.add(nodeId)
    this.inForce.set(nodeId, share)
    this.centiInForce += share.centiPerSecond
    this.invalidInForce += share.invalidBudget
    return share
  }

  /** A live node's share in force and demand (the operator's view), or null when it reports no demand (not in the budget). */
  viewOf(now: number, nodeId: string): RestNodeView | null {
    this.expire(now)
    const demand = this.demands.get(nodeId)
    if (demand === undefined) return null
    const share = this.inForce.get(nodeId) ?? NO_SHARE
    return { perSecond: share.centiPerSecond / 100, invalidBudget: share.invalidBudget, demand: { perSecond: demand.centiPerSecond / 100, invalid10m: demand.invalid10m } }
  }

  /** The budget as a whole at `now` (the plan view, metrics): the sums of the shares in force never exceed the safe budgets. */
  view(now: number): RestBudgetView {
    this.expire(now)
    let demand = 0
    for (const [nodeId, reported] of this.demands) if (this.host.live.has(nodeId)) demand += reported.centiPerSecond
    return {
      globalPerSecond: this.settings.globalPerSecond,
      safety: this.settings.safety,
      budgetPerSecond: this.centiBudget / 100,
      invalidBudget: this.invalidBudget,
      allocatedPerSecond: this.centiInForce / 100,
      allocatedInvalid: this.invalidInForce,
      demandPerSecond: demand / 100,
    }
  }

  /** The fair targets of every live node that reports demand: demand floored at 1/s (a draining node: the floor only). */
  private recompute(now: number): void {
    this.computedAt = now
    this.liveAtCompute = this.host.live.size
    for (const nodeId of this.demands.keys()) if (!this.host.live.has(nodeId)) this.demands.delete(nodeId)
    const ids: string[] = []
    const centi: number[] = []
    const invalid: number[] = []
    for (const [nodeId, demand] of this.demands) {
      const draining = this.host.draining.has(nodeId)
      ids.push(nodeId)
      centi.push(draining ? FLOOR_CENTI : Math.max(FLOOR_CENTI, demand.centiPerSecond))
      invalid.push(draining ? 0 : demand.invalid10m)
    }
    const centiShares = waterFill(centi, this.centiBudget)
    const invalidShares = spreadReserve(invalid, this.invalidBudget)
    this.targets = new Map(ids.map((nodeId, i) => [nodeId, { centi: centiShares[i]!, invalid: invalidShares[i]! }]))
  }

  /** Drops the shares whose `until` passed (the oldest are first). */
  private expire(now: number): void {
    for (const [nodeId, share] of this.inForce) {
      if (share.untilMs > now) break
      this.end(nodeId)
    }
    if (now >= this.unknownUntil && this.answeredSinceRestore.size > 0) this.answeredSinceRestore.clear()
  }

  private end(nodeId: string): void {
    const share = this.inForce.get(nodeId)
    if (share === undefined) return
    this.inForce.delete(nodeId)
    this.centiInForce -= share.centiPerSecond
    this.invalidInForce -= share.invalidBudget
  }
}
