/**
 * The agent's key for a shard session: its shard count and its number (Discord's shard = [id, num_shards]).
 * During a live reshard a node runs shard 3 of 8 and shard 3 of 16 at once: two sessions, two keys. At
 * the switch the next set's sessions become the current set's under the same keys, so they keep running.
 * A bare shard number (below SPAN) is its own key: the runner and the scheduler take those in tests.
 */
const SPAN = 65_537

/** The key of shard `shardId` of `totalShards`. */
export function shardKey(totalShards: number, shardId: number): number {
  return totalShards * SPAN + shardId
}

/** The shard number of a key. */
export function keyShard(key: number): number {
  return key % SPAN
}

/** The shard count of a key (0 for a bare shard number). */
export function keyTotal(key: number): number {
  return Math.floor(key / SPAN)
}
