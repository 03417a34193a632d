/** Stable error codes and the one place they map to HTTP statuses. */

export const ERROR_STATUS = {
  invalid_request: 400,
  unauthenticated: 401,
  forbidden: 403,
  identity_mismatch: 403,
  not_owner: 403,
  not_found: 404,
  request_timeout: 408, // headers or body too slow (src/server/http-limits.ts)
  identity_conflict: 409,
  reshard_in_progress: 409, // POST /v1/reshard while one runs (SPEC "Live resharding")
  budget_insufficient: 409, // POST /v1/reshard: the daily Identify budget left is below the new shard count
  insufficient_capacity: 409, // POST /v1/nodes/:id/drain: the other live nodes cannot take the drained node's shards
  agents_outdated: 409, // POST /v1/reshard: a live node's agent has not shown it runs a next set (not in the SPEC's list)
  gone: 410, // an enrollment or renewal request past its time (SPEC "Device enrollment and renewal")
  payload_too_large: 413,
  unsupported_media_type: 415,
  uri_too_long: 414,
  headers_too_large: 431,
  rate_limited: 429,
  expectation_failed: 417,
  internal_error: 500,
  not_leader: 503, // HA: another replica leads (its controller_id is in the message)
  unavailable: 503, // state cannot be made durable, or an HA leader lost etcd

} as const

export type ErrorCode = keyof typeof ERROR_STATUS

/** A domain error with a stable code; thrown anywhere, rendered as `{error, message}` by one handler. */
export class AppError extends Error {
  readonly statusCode: number
  /**
   * @param extra fields added to the body beside `error` and `message` (e.g. `retry_after_ms`)
   * @param headers response headers (e.g. `retry-after`)
   */
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extra: Readonly<Record<string, unknown>> = {},
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message)
    this.name = 'AppError'
    this.statusCode = ERROR_STATUS[code]
  }
}
