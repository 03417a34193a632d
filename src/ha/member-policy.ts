/**
 * How calls spread over etcd members (the client library's fault-handling hooks). etcd3's default opens
 * a 5 s circuit breaker on a member after three failed calls: during an etcd leader election every
 * member fails briefly, and 5 s without etcd would make a healthy leader step down. Instead, a member
 * whose last call failed is skipped for a short cool-down while another member is not cooling down,
 * so a hung or dead member costs one call, and the last usable member is never refused.
 */
import { performance } from 'node:perf_hooks'

/** The one method the client library calls on a policy. */
export interface CallPolicy {
  execute<T>(fn: () => T | PromiseLike<T>): Promise<T>
}

/** Thrown instead of calling a cooling-down member; the library then tries the next member. */
export class MemberCoolingDown extends Error {
  override readonly name = 'MemberCoolingDown'
}

/** The per-member policies, and a way to report a member's fault seen outside any call they wrap. */
export interface MemberPolicies {
  (member: string): CallPolicy
  /**
   * Counts a fault against the member at `address` (host:port, as a gRPC call's getPeer() names it).
   * Returns whether a member matched. Only a fallback for a timed-out keepalive now (failCallOf): for a
   * stream whose member never answered, getPeer() is 'unknown' and matches nothing.
   */
  failAddress(address: string): boolean
  /**
   * Counts a fault against the member a call was made on, by what a policy's `execute` returned for it
   * (a stream: its opening is all the policies see). Returns whether the call is known. This is what a
   * lease keepalive that timed out uses: grpc-js's getPeer() is 'unknown' until a call is committed,
   * which for a stream is when the server's response headers arrive, and a frozen member sends none; so
   * failAddress never matched and the next renewal could pick the same member again.
   */
  failCallOf(result: object): boolean
}

/** host:port of a member's endpoint URL (https://10.0.0.1:2379 → 10.0.0.1:2379), or null. */
function addressOf(member: string): string | null {
  try {
    return new URL(member.includes('://') ? member : `https://${member}`).host
  } catch {
    return null
  }
}

/**
 * A policy per member that skips recently failed members while a healthy one is left; `isFault` tells
 * a member's failure (unreachable, timed out) from a refusal of the request itself.
 */
export function memberPolicies(isFault: (err: unknown) => boolean, coolDownMs = 2000, now: () => number = () => performance.now()): MemberPolicies {
  const failedAt = new Map<string, number>()
  const cooling = (member: string) => now() - (failedAt.get(member) ?? -Infinity) < coolDownMs
  const policy = (member: string): CallPolicy => {
    failedAt.set(member, -Infinity)
    return {
      async execute<T>(fn: () => T | PromiseLike<T>): Promise<T> {
        if (cooling(member) && [...failedAt.keys()].some((m) => !cooling(m))) throw new MemberCoolingDown(`etcd member ${member} failed just now`)
        try {
          const result = await fn()
          failedAt.set(member, -Infinity)
          if (typeof result === 'object' && result !== null) madeOn.set(result, member)
          return result
        } catch (err) {
          if (isFault(err)) failedAt.set(member, now())
          throw err
        }
      },
    }
  }
  /**
   * The member each call result came from; weak: it goes with the call. Only streams are ever looked
   * up (a unary result retried on another member inside the first one's execute ends up recorded
   * against the outer member, which no lookup asks about).
   */
  const madeOn = new WeakMap<object, string>()
  const failCallOf = (result: object): boolean => {
    const member = madeOn.get(result)
    if (member === undefined) return false
    failedAt.set(member, now())
    return true
  }
  const failAddress = (address: string): boolean => {
    const member = [...failedAt.keys()].find((m) => addressOf(m) === address)
    if (member === undefined) return false
    failedAt.set(member, now())
    return true
  }
  return Object.assign(policy, { failAddress, failCallOf })
}

/** Retries a call refused unprocessed (`retryable`) on the next member, at most once per member. */
export function retryOnOtherMember(members: number, retryable: (err: unknown) => boolean): CallPolicy {
  return {
    async execute<T>(fn: () => T | PromiseLike<T>): Promise<T> {
      for (let attempt = 1; ; attempt++) {
        try {
          return await fn()
        } catch (err) {
          if (attempt >= members || !retryable(err)) throw err
        }
      }
    },
  }
}
