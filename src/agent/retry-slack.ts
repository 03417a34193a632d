/**
 * The slack a failed check-in's retry is spread over (cadence.ts): the time from now until the last
 * moment an attempt can be sent and still be answered in time, the attempt's reserve kept back.
 *
 * "In time" has two meanings. While the node holds authority it is the fail-safe's moment: a renewal
 * before it keeps every shard running. Once the fail-safe has fired, the shards are stopped but the
 * controller still holds the node's range until the lease ends (it counts the lease from when a check-in
 * arrives, and authority from when it was sent, so authority never outlasts it): a renewal before then
 * keeps the range, and the node starts the same shards again, resuming them, where an expired lease
 * moves them to other nodes. Without this second deadline a node past its fail-safe backed off like a
 * joining one (0.5, 1, 2 … s, or the whole of a busy controller's appointment), and in a 10,000-node
 * take-over that ran slow the nodes late for their fail-safe let their leases run out too: 2,709 shards
 * moved.
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
 * Ms of slack (≥ 0) before the fail-safe, or after it before the lease ends; null once the lease has
 * ended (nothing is at stake: the node retries as a joining one) or with no authority to keep.
 */
export function retrySlackMs(input: RetrySlackInput): number | null {
  const { now, authorityEndsAt, failSafeLeadMs, reserveMs } = input
  if (authorityEndsAt === null) return null
  const failSafeAt = authorityEndsAt - failSafeLeadMs
  const deadline = now < failSafeAt ? failSafeAt : authorityEndsAt
  if (now >= deadline) return null
  return Math.max(0, deadline - now - reserveMs)
}
