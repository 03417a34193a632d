/**
 * The slack a failed check-in's retry is spread over (cadence.ts): the time from now until the last
 * moment an attempt can be sent and still be answered in time, the attempt's reserve kept back.
 *
 * "In time" has two meanings. While the node holds authority it is the fail-safe's moment: a renewal
 * before it keeps every shard running. Once the fail-safe has fired, the shards are stopped but the
 * controller still holds the node's range until the lease ends (it counts the lease from when a check-in
 * arrives, and authority from when it was sent, so authority never outlasts it): a renewal before then
 * keeps the range, and the node claims the same shards again, where an expired lease moves them to other
 * nodes (and their sessions with them). Without this second deadline a node past its fail-safe backed off
 * like a joining one (0.5, 1, 2 … s, or the whole of a busy controller's appointment), and in a
 * 10,000-node take-over that ran slow the nodes late for their fail-safe let their leases run out too:
 * 2,709 shards moved.
 *
 * Before the fail-safe a slack of 0 means "the last attempts" (cadence.ts: 0.25–0.75 s apart, before any
 * appointment): the shards still run. After it there are no last attempts: once the reserve before the
 * lease's end is reached, the slack is null and the node backs off, or keeps an appointment, as a joining
 * one does. A late node has stopped its shards already, and a controller in a storm would otherwise get
 * a second burst of quick attempts from every late node.
 *
 * Pure: the agent and the fleet bench's light node both call it.
 */

/** Where a node stands, all on one monotonic clock (ms). */
export interface RetrySlackInput {
  readonly now: number
  /** When its authority ends: the last renewal's sending time plus the lease; null without one. */
  readonly authorityEndsAt: number | null
  /** How long before that the fail-safe stops every shard (stop timeout + margin). */
  readonly failSafeLeadMs: number
  /** What an attempt is given to be answered (node-agent.ts attemptReserveMs). */
  readonly reserveMs: number
}

/**
 * Ms of slack before the fail-safe (≥ 0), or after it before the lease ends (> 0); null with no
 * authority to keep, or once too little of the lease is left (the node retries as a joining one).
 */
export function retrySlackMs(input: RetrySlackInput): number | null {
  const { now, authorityEndsAt, failSafeLeadMs, reserveMs } = input
  if (authorityEndsAt === null) return null
  const failSafeAt = authorityEndsAt - failSafeLeadMs
  if (now < failSafeAt) return Math.max(0, failSafeAt - now - reserveMs)
  const slack = authorityEndsAt - now - reserveMs
  return slack > 0 ? slack : null
}
