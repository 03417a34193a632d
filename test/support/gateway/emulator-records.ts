/**
 * What the emulator records for tests to assert on: every breach of a Discord rule (or of the
 * product's at-most-one-owner rule), every IDENTIFY and RESUME with its outcome, and counters.
 * `at` is milliseconds since the emulator started.
 */

/** Which shard of which shard count a connection or session serves. */
export interface ShardRef {
  readonly shardId: number
  readonly numShards: number
}

/** Common fields of every breach. */
interface BreachBase {
  readonly at: number
  /** The connection it happened on (null for findings between sessions). */
  readonly connectionId: number | null
  readonly detail: string
}

/** A second accepted IDENTIFY in one bucket within identifyWindowMs; answered INVALID_SESSION d:false. */
export interface BucketBreach extends BreachBase, ShardRef {
  readonly kind: 'bucket'
  readonly bucket: number
  /** When the bucket's previous accepted IDENTIFY arrived, and how long before this one. */
  readonly previousAt: number
  readonly sincePreviousMs: number
}

/** An IDENTIFY with session_start_limit.remaining at 0: Discord terminates every session and resets the token. */
export interface SessionStartLimitBreach extends BreachBase, ShardRef {
  readonly kind: 'session_start_limit'
}

/**
 * Two live sessions for the same [shard_id, num_shards] at once. Discord allows it ("You can establish
 * multiple sessions with the same [shard_id, num_shards]"); the product's rule is one owner per shard.
 */
export interface OverlapBreach extends BreachBase, ShardRef {
  readonly kind: 'overlap'
  readonly sessionIds: readonly [string, string]
}

/**
 * Two live sessions of different num_shards that serve a common guild (shard a of Sa and b of Sb share
 * guilds iff a ≡ b mod gcd(Sa, Sb)). Discord allows it for zero-downtime resharding; every such guild's
 * events then reach the bot twice, so a test decides whether it was expected.
 */
export interface GuildOverlapBreach extends BreachBase {
  readonly kind: 'guild_overlap'
  readonly a: ShardRef & { readonly sessionId: string }
  readonly b: ShardRef & { readonly sessionId: string }
  /** The smallest guild ID both serve (a witness, not necessarily one of the emulator's guilds). */
  readonly witnessGuildId: string
  /** How many of the emulator's own guilds both serve. */
  readonly commonGuilds: number
}

/** No heartbeat within heartbeatIntervalMs + heartbeatGraceMs: the connection is closed 4009, the session stays resumable. */
export interface HeartbeatMissBreach extends BreachBase {
  readonly kind: 'heartbeat_miss'
  readonly shardId: number | null
  readonly sessionId: string | null
  readonly waitedMs: number
}

/** More than sendLimit.count payloads on one connection within sendLimit.windowMs: closed 4008. */
export interface SendRateBreach extends BreachBase {
  readonly kind: 'send_rate_limit'
  readonly shardId: number | null
  readonly sessionId: string | null
  readonly sent: number
}

/** Anything else the gateway closes a connection for (4001-4005, 4007, 4010-4014, unsupported query). */
export interface ProtocolBreach extends BreachBase {
  readonly kind: 'protocol'
  readonly closeCode: number
  readonly shardId: number | null
  readonly sessionId: string | null
}

/** Every kind of breach. */
export type Breach =
  | BucketBreach
  | SessionStartLimitBreach
  | OverlapBreach
  | GuildOverlapBreach
  | HeartbeatMissBreach
  | SendRateBreach
  | ProtocolBreach

/** One IDENTIFY that got as far as the shard checks, and how it ended. */
export interface IdentifyRecord extends ShardRef {
  readonly at: number
  readonly connectionId: number
  readonly bucket: number
  /** `ready` (a session started), `bucket_refused` (INVALID_SESSION), `limit_exceeded`, or `closed` with closeCode. */
  readonly outcome: 'ready' | 'bucket_refused' | 'limit_exceeded' | 'closed'
  readonly closeCode: number | null
  readonly sessionId: string | null
}

/** One RESUME and how it ended. */
export interface ResumeRecord {
  readonly at: number
  readonly connectionId: number
  /** Which URL the connection came in on: GET /gateway/bot's `url`, or READY's `resume_gateway_url`. */
  readonly via: 'gateway' | 'resume'
  readonly sessionId: string
  /** The session's shard, or null when the session is unknown. */
  readonly shardId: number | null
  readonly numShards: number | null
  readonly seq: number
  /** `resumed`, `refused` (INVALID_SESSION d:false, with reason) or `closed` (4007 invalid seq). */
  readonly outcome: 'resumed' | 'refused' | 'closed'
  readonly reason: 'unknown' | 'ended' | 'expired' | 'invalidated' | 'invalid_seq' | null
  /** How many dispatches were replayed before RESUMED. */
  readonly replayed: number
  /** The connection the session was still live on and that this RESUME closed (a zombie take-over), or null. */
  readonly tookOverConnectionId: number | null
}

/** Total and per-shard-ID counts. */
export interface Count {
  readonly total: number
  readonly byShard: Readonly<Record<number, number>>
}

/** `emulator.stats`. */
export interface GatewayStats {
  /** IDENTIFY payloads received, whatever became of them. */
  readonly identifies: Count
  /** IDENTIFYs that started a session (READY sent). */
  readonly sessionsStarted: Count
  readonly resumes: Count
  readonly refusedResumes: Count
  readonly connections: number
  readonly gatewayBotRequests: number
  /** session_start_limit.remaining now. */
  readonly sessionStartsRemaining: number
}
