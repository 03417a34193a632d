/**
 * The words of the config reference: what each key does and when to change it, and the rules the code
 * enforces that a JSON Schema cannot carry (a refinement, a cross-key check). Types, ranges, defaults and
 * whether a key is required are read from the schema itself (entries.ts); this table holds only prose,
 * and the generator refuses a key without a note and a note without a key.
 */

/** The prose of one key. */
export interface KeyNote {
  /** One or two sentences: what the key does and when to change it. */
  readonly text: string
  /** A path to a file or folder: a string the controller resolves against the config file's folder. */
  readonly path?: true
  /** Rules beyond the schema's type and range (refinements and checks across keys), as the code words them. */
  readonly rule?: string
  /** What an optional key without a schema default means when absent. */
  readonly absent?: string
  /** Replaces "required"/"optional" when a check across keys decides it. */
  readonly required?: string
}

/** A section of the page: a title, a sentence, and the top-level keys it covers (their nested keys follow them). */
export interface KeyGroup {
  readonly title: string
  readonly intro: string
  readonly keys: readonly string[]
}

export const KEY_GROUPS: readonly KeyGroup[] = [
  {
    title: 'Listener and TLS',
    intro: 'Where the mTLS API listens and the files `pxe-pki export-controller` writes for it.',
    keys: ['listen', 'tls'],
  },
  {
    title: 'Plan keys, state and audit',
    intro: 'What the controller signs with, where it keeps what survives a restart, and what it audits to.',
    keys: ['plan_keys', 'state_dir', 'audit_log', 'controller_id'],
  },
  {
    title: 'Shards and Identify',
    intro: "The bot's shard count and Discord's Identify rules; the values come from `GET /gateway/bot`.",
    keys: ['total_shards', 'max_concurrency', 'lease_seconds', 'identify_interval_ms', 'daily_identify_limit', 'planner'],
  },
  {
    title: 'Session handoff',
    intro: 'A shard moved by plan resumes its Discord session on the new owner instead of identifying again.',
    keys: ['session_handoff'],
  },
  {
    title: 'REST budget',
    intro: "The bot's REST limits, which Discord counts across all its machines: the controller shares them among the nodes (their `pxe-node --rest-proxy` enforces each share).",
    keys: ['rest'],
  },
  {
    title: 'Limits',
    intro: 'Per-certificate request rates, and connection caps applied at accept time before any TLS work.',
    keys: ['rate_limits', 'max_connections_per_address', 'max_connections'],
  },
  {
    title: 'Operations endpoint',
    intro: 'A second, plain-HTTP listener for monitoring: `GET /metrics`, `/healthz` and `/readyz`, nothing else.',
    keys: ['ops'],
  },
  {
    title: 'Enrollment',
    intro: 'A second TLS listener where diskless nodes enroll with a bootstrap token (no client certificate); the CA host\'s signer answers them.',
    keys: ['enroll'],
  },
  {
    title: 'High availability',
    intro: 'Two or more controllers share one deployment through etcd (v3 API, mutual TLS); one leads, the others answer 503 `not_leader`.',
    keys: ['ha'],
  },
]

export const KEY_NOTES: Readonly<Record<string, KeyNote>> = {
  listen: { text: 'The mTLS API listener that nodes and `pxe-ctl` connect to.' },
  'listen.host': {
    text: "Address to bind: `0.0.0.0` for every IPv4 interface, `::` for every interface. The server certificate's SANs (`pxe-pki server-cert --dns/--ip`) must cover the name or address the nodes dial.",
  },
  'listen.port': {
    text: 'TCP port of the API. A port below 1024 needs `CAP_NET_BIND_SERVICE`; 0 picks a free port (tests only).',
  },
  tls: { text: 'The CA, the controller certificate and key, and the CRL.' },
  'tls.ca': { path: true, text: 'CA certificate (`ca.pem`): every client certificate must chain to it.' },
  'tls.cert': { path: true, text: 'Controller certificate (`server.pem`, serverAuth).' },
  'tls.key': {
    path: true,
    rule: 'file mode 0600 or stricter',
    text: 'Controller private key (`server-key.pem`). The start is refused if group or others can read or write it.',
  },
  'tls.crl': {
    path: true,
    text: 'Certificate revocation list (`crl.pem`), watched: a new file is in force within 2 s without a restart, and the connections of certificates it revokes are closed. A CRL that does not verify under the CA is refused (the old one stays in force) and audited.',
  },
  plan_keys: {
    path: true,
    rule: 'file mode 0600 or stricter',
    text: 'The Ed25519 plan-signing keys (`plan-keys.json`: `{"current": kid, "keys": [JWK, ...]}`); rotate them with `pxe-pki plan-key rotate`. The start is refused if group or others can read or write the file.',
  },
  state_dir: {
    path: true,
    required: 'required unless `ha` is set',
    text: 'Folder of the persisted state (generation, node records, pending handoffs, drain flags, daily grants, revoked nodes still inside their lease). It must be writable; back it up. With `ha` the state lives in etcd: a `state_dir` given then is read once to seed an etcd that holds no state yet, and never written.',
  },
  audit_log: {
    path: true,
    text: 'The hash-chained audit log, one JSON line per event; it must be writable. Check it with `pxe-pki audit-verify`.',
  },
  controller_id: {
    absent: 'the host name',
    rule: 'printable ASCII, no spaces',
    text: 'The `iss` of every signed plan and the name other replicas give when they answer `not_leader`. Keep it stable across restarts; give each HA replica its own.',
  },
  total_shards: {
    rule: 'a multiple of `max_concurrency` when that is above 1 (Discord requires it)',
    text: 'Number of Discord gateway shards to assign. Changing it between runs is a reshard.',
  },
  max_concurrency: {
    text: "Discord's `max_concurrency` for the bot: the number of Identify buckets; shard *s* is in bucket *s* mod `max_concurrency`.",
  },
  lease_seconds: {
    text: "How long a node's assignment lives without a check-in; after it the node's shards are reassigned, and a node that has not renewed within it stops its shards by itself (the fail-safe). Nodes check in every third of it; raise it when check-ins cross a slow or lossy network.",
  },
  identify_interval_ms: {
    text: "Minimum spacing of Identify grants per bucket. Discord's window is 5 s and grants spaced at exactly 5000 ms draw INVALID_SESSION, so the default keeps a margin; raise it only to slow a fleet's start.",
  },
  daily_identify_limit: {
    absent: 'no daily budget',
    text: "Identify grants allowed over a rolling 24 h across all nodes and buckets; once spent, claims are answered `daily_limit` with `retry_after_ms`. Set it below Discord's daily session-start limit: exceeding that resets the bot token.",
  },
  planner: {
    absent: 'the contiguous planner',
    text: 'How shards are laid over the nodes: `contiguous` recomputes every range from the live set; `stable` keeps ranges and moves only the shards a change needs. Changing it between runs is a reshard (reason `planner`).',
  },
  session_handoff: { text: 'Which resume URLs a deposited session may send the next owner to, and how long the controller holds it.' },
  'session_handoff.allowed_hosts': {
    rule: 'each entry a lower-case host name, an IPv4 address, `[::1]`, or `*.` and a name of at least two labels (`"*"` and `"*.gg"` are refused)',
    text: "Hosts a deposited `resume_url` may name (`*.discord.gg` admits `gateway-us-east1-b.discord.gg`, never `discord.gg`). An empty list refuses every deposit: nodes then Identify as before. Change it only to point nodes at a gateway emulator.",
  },
  'session_handoff.ttl_seconds': {
    text: 'How long a deposited session is held in memory for the next owner; past it the session is dropped and the new owner identifies. Discord keeps a resumable session for a short while only.',
  },
  rest: {
    absent: 'no REST budget: answers carry no `rest` share',
    text: "Shares the bot's REST rate limit and invalid-request budget among the live nodes by max-min fairness of the demand they report; each answer and signed plan carries the node's share, valid until its lease ends. A node's REST proxy sends nothing without a share.",
  },
  'rest.global_per_second': { text: "Discord's global REST limit of the bot: 50 requests per second unless Discord raised it for the bot." },
  'rest.safety': {
    rule: 'above 0, at most 1',
    text: 'The part of the limits handed out: shares add up to at most `global_per_second × safety` (and `invalid_per_10_minutes × safety`). The rest absorbs clock and network jitter between machines.',
  },
  'rest.invalid_per_10_minutes': { text: 'Invalid responses (401, 403, 429) Discord tolerates from one address in 10 minutes before it bans the address for an hour.' },
  rate_limits: { text: 'A token bucket per certificate serial and role, checked right after authentication; over it, 429 `rate_limited` and nothing changes.' },
  'rate_limits.node': { text: "The bucket of each node certificate: a node checks in every third of `lease_seconds` and claims a few Identifies a second." },
  'rate_limits.node.per_second': { text: 'Tokens added per second, continuously.' },
  'rate_limits.node.burst': { text: 'Size of the bucket: the most requests in a row after a quiet spell.' },
  'rate_limits.operator': { text: 'The bucket of each operator certificate (`pxe-ctl`, `pxe-pki`).' },
  'rate_limits.operator.per_second': { text: 'Tokens added per second, continuously.' },
  'rate_limits.operator.burst': { text: 'Size of the bucket: the most requests in a row after a quiet spell.' },
  'rate_limits.signer': { text: "The bucket of each signer certificate (`pxe-pki signer` on the CA host): it posts one answer per request, so a boot storm of a thousand nodes is a thousand posts." },
  'rate_limits.signer.per_second': { text: 'Tokens added per second, continuously.' },
  'rate_limits.signer.burst': { text: 'Size of the bucket: the most requests in a row after a quiet spell.' },
  enroll: {
    text: 'The enrollment listener: `POST /v1/enroll` and `GET /v1/enroll/:request_id` over TLS with the server certificate, asking for no client certificate. Renewals and the signer use the mTLS listener whether or not this is on.',
    absent: 'no enrollment listener: nodes get their certificates from `pxe-pki issue` or `sign-csr`',
  },
  'enroll.host': { text: 'Address to bind, usually the provisioning network\'s interface only; the server certificate must name what nodes dial (as for `listen.host`).' },
  'enroll.port': { text: 'TCP port of the enrollment listener.', rule: 'must differ from `listen.port` and `ops.port`' },
  'enroll.poll_after_ms': { text: 'How long a node is told to wait between polls of its request.' },
  'enroll.per_address': { text: 'A token bucket per source address (IPv6: per /64) over both enrollment endpoints; over it, 429 `rate_limited`.' },
  'enroll.per_address.per_second': { text: 'Tokens added per second, continuously.' },
  'enroll.per_address.burst': { text: 'Size of the bucket: the most requests in a row after a quiet spell.' },
  'enroll.per_address_pending': { text: 'Requests one address may have waiting for the signer at once; more get 429 while others are still served.' },
  'enroll.per_token_pending': { text: 'Requests one token id may have waiting at once (a leaked token id cannot fill the queue of 10,000 alone).' },
  max_connections_per_address: {
    text: 'Open connections allowed from one source address (IPv6 counts per /64); the excess is dropped at accept time, counted, and audited at most once a minute per address. Raise it when many nodes share one address behind NAT.',
  },
  max_connections: {
    text: 'Open connections allowed in total; the excess is dropped at accept time. Give the process a file-descriptor limit above it (the systemd unit sets `LimitNOFILE=65536`).',
  },
  ops: {
    text: 'The operations listener; it has no authentication. `null` turns it off.',
  },
  'ops.host': {
    rule: 'a loopback address (`127.x.y.z`, `::1`, `localhost`) unless `ops.allow_remote` is `true`',
    text: 'Address of the ops listener. Keep it on loopback, or set `allow_remote` and firewall it (a container needs `0.0.0.0`).',
  },
  'ops.port': {
    rule: 'not `listen.port`',
    text: 'Port of the ops listener, the one Prometheus scrapes.',
  },
  'ops.allow_remote': {
    text: 'Must be `true` for a non-loopback `ops.host`: serving plain HTTP beyond the host has to be asked for on purpose.',
  },
  ha: { absent: 'the file store in `state_dir`', text: 'High availability on etcd. Every replica uses the same CA, CRL, plan keys and `ha` section, and its own `controller_id`.' },
  'ha.etcd': { text: 'How the controllers reach etcd: mutual TLS only, no passwords.' },
  'ha.etcd.endpoints': {
    rule: 'each an `https://host:port` URL with nothing else',
    text: 'Client URLs of the etcd members; list every member.',
  },
  'ha.etcd.ca': { path: true, text: "etcd's CA certificate, trusted for etcd connections only." },
  'ha.etcd.cert': { path: true, text: "The controllers' etcd client certificate." },
  'ha.etcd.key': { path: true, rule: 'file mode 0600 or stricter', text: "The controllers' etcd client key." },
  'ha.etcd.server_name': {
    absent: "the endpoint's host",
    rule: 'a DNS name, not an IP address',
    text: "The name every member's server certificate carries, sent as TLS SNI and checked instead of the endpoint's host. Set it when the endpoints are IP addresses: SNI may carry no address (RFC 6066), and Node warns `DEP0123`.",
  },
  'ha.etcd.max_txn_ops': {
    text: "The members' `--max-txn-ops`: the most operations one etcd transaction may carry. Raise both together so a large change goes out in fewer transactions; set above what etcd allows, the controller logs a warning and falls back to 128.",
  },
  'ha.prefix': {
    text: 'Key prefix of one deployment in etcd (`<prefix>election/`, `<prefix>state/`); every replica of a deployment uses the same one, and two deployments never share one.',
  },
  'ha.lease_ttl_seconds': {
    text: "The leader's etcd lease. A leader that has not renewed it within 2/3 of it stops answering; another replica leads about one TTL after the leader died. Keep it at 10 or more with a three-member etcd (an etcd election under load can take seconds), and `lease_seconds` at least three times it (the defaults, 30 and 10, are), so that nodes renew with the new leader before their leases run out.",
  },
}
