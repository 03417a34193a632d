/** What each error code means, for the API reference (docs/openapi.json, docs/api.md); one sentence each. */
import type { ErrorCode } from '../errors.js'

export const ERROR_MEANINGS: Readonly<Record<ErrorCode, string>> = {
  invalid_request: 'the request is malformed: a body, parameter or URL that breaks its schema (the message names the first problem)',
  unauthenticated: 'no valid client certificate of this CA: missing, revoked, expired, or breaking the identity rules',
  forbidden: "the certificate's role may not call this endpoint",
  identity_mismatch: "the body's node_id is not the certificate's CN",
  not_owner: 'the shard is not assigned to this node in the current plan (or in the next set)',
  not_found: 'no such endpoint, or nothing to act on (DELETE /v1/reshard without a live reshard)',
  request_timeout: 'the headers or the body did not arrive in time',
  gone: 'an enrollment or renewal request past its time (1 hour pending, 10 minutes after its answer): send a new one',
  identity_conflict: 'another certificate of the same name holds the node: an older one at check-in, any other one for a claim',
  reshard_in_progress: 'a reshard runs, or nodes may still run shards of the set the last one retired (Retry-After then says how long)',
  budget_insufficient: 'the daily Identify budget left is below the new shard count',
  insufficient_capacity: 'the drain would leave shards without a node (`unassigned` says how many); send "force": true to drain anyway',
  agents_outdated: 'a live node has not shown that its agent runs a next set (it sent no next_ready_shards since the last restart)',
  payload_too_large: 'the body is over its limit (or, on the ops listener, there is a body at all)',
  unsupported_media_type: 'the body is not of a media type the endpoint takes',
  uri_too_long: 'a path parameter is longer than any valid value',
  headers_too_large: 'the request headers are over the limit',
  rate_limited: 'this certificate spent its rate; wait retry_after_ms (Retry-After in seconds) and retry',
  expectation_failed: 'an Expect header other than 100-continue',
  internal_error: 'a fault of the controller; the request may or may not have taken effect, and the log names the request',
  not_leader: 'HA: another replica leads (named in the message); ask it',
  unavailable: 'the state cannot be made durable now, or an HA leader is being elected or lost etcd; retry shortly',
}
