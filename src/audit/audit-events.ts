/** The audit event names, one per security event of the SPEC "Audit log" section. */

/** Every event name the audit log accepts, in the SPEC's order. */
export const AUDIT_EVENTS = [
  'tls_rejected', // a TLS client was refused (bad, missing, revoked or expired certificate)
  'connection_refused', // a connection dropped at accept time: over the per-address or total cap
  'unauthenticated', // a request without a usable client identity
  'identity_mismatch', // a node spoke for another node's ID
  'identity_conflict', // a second certificate claimed a live node's ID
  'identity_rotated', // a node came back with a newer certificate
  'not_owner', // an Identify claim for a shard the node does not own
  'identify_granted',
  'session_deposited', // a node released a shard by plan and left its session for the next owner (node and shard only)
  'session_handed', // a held session went to the shard's new owner, which RESUMEs instead of identifying
  'session_deposit_refused', // a check-in's sessions broke a rule (a foreign resume host, another node's shard): refused whole
  'plan_generation_changed',
  'reshard', // restarted with another total_shards or max_concurrency than the state was written with
  'reshard_started', // live reshard: POST /v1/reshard (with the operator); the next set identifies beside the current one
  'reshard_switched', // live reshard: every next-set shard ran; total_shards is the new count
  'reshard_aborted', // live reshard: DELETE /v1/reshard (with the operator), or a restart with another configuration
  'drain_set', // with the operator who set it
  'crl_loaded',
  'crl_refused', // bad signature, foreign CA, older CRL number, critical extension, expired; the old CRL stays
  'crl_pending', // a newer CRL whose thisUpdate is still in the future waits; installed (crl_loaded) once valid
  'crl_expiring', // nextUpdate less than a day away or past
  'node_expired',
  'node_removed', // e.g. revoked
  'node_left', // a node shutting down said so ("leaving": true): out of the plan at once, its shards released
  'controller_start',
  'controller_stop',
  'leader_elected', // HA: this replica leads (with the generation it continues from)
  'leader_lost', // HA: this replica stopped leading (renew deadline, fence refused, key lost, stop)
  'fenced_write_refused', // HA: etcd refused a state write: another replica may lead; this one steps down
  'audit_chain_resumed', // the log was reopened after a torn write or with a broken tail
  'enroll_requested', // a node asked for a certificate (enrollment with a token id, or renewal): queued for the signer
  'enroll_issued', // the signer's certificate was installed for a request (with the signer and the rule)
  'enroll_denied', // the signer denied a request (with its reason)
  'enroll_refused', // a request refused at the door (shape, CSR, key, name; limited per address), or a signer's certificate that does not fit its request
] as const

/** One audit event name. */
export type AuditEventName = (typeof AUDIT_EVENTS)[number]
