/** What the mTLS bench's load generator and its two targets must agree on. */

/** Clients = connections = distinct node certificates. */
export const BENCH_NODES = 32
export const BENCH_TOTAL_SHARDS = 1024
export const BENCH_MAX_CONCURRENCY = 16
export const BENCH_LEASE_SECONDS = 30
/** 32 nodes × 32 = 1024: every node is filled to its capacity, as in the ceiling's fixed plan. */
export const BENCH_CAPACITY = 32

/**
 * The per-certificate rate limits of the bench's controller: each connection checks in thousands of
 * times a second, far above any real node, so the limits are raised out of the way. The buckets are
 * still checked on every request (their cost is measured); they just never refuse.
 */
export const BENCH_RATE_LIMITS = {
  node: { per_second: 1_000_000, burst: 1_000_000 },
  operator: { per_second: 1_000_000, burst: 1_000_000 },
} as const

/** `bench-node-07`: the ceiling reads the index back from the last two digits. */
export function benchNodeName(index: number): string {
  return `bench-node-${String(index).padStart(2, '0')}`
}

/** The index of a bench node name, or -1. */
export function benchNodeIndex(name: string): number {
  const match = /^bench-node-(\d{2})$/.exec(name)
  return match ? Number(match[1]) : -1
}
