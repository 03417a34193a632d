/**
 * Connection limits of the HTTPS server. They live here, not in fastify's options, because fastify
 * applies its timeout options only to a server it creates itself; ours comes from a serverFactory.
 */
export const HTTP_LIMITS = {
  /** A TLS handshake must finish in this time. */
  handshakeTimeoutMs: 10_000,
  /** All request headers must arrive in this time (slowloris bound). */
  headersTimeoutMs: 5_000,
  /** The whole request, body included, must arrive in this time. */
  requestTimeoutMs: 10_000,
  /** An idle keep-alive connection is closed after this; a node checking in more often keeps its connection. */
  keepAliveTimeoutMs: 30_000,
  /** Any socket without traffic for this long is closed (above keep-alive, so that one decides idling). */
  socketIdleTimeoutMs: 35_000,
  /** How often Node checks the header and request deadlines (its default, 30 s, would blunt them). */
  checkIntervalMs: 1_000,
  /** Request headers larger than this are refused with 431. */
  maxHeaderBytes: 8192,
  /**
   * The kernel's queue of connections not yet accepted (Linux caps it at net.core.somaxconn, 4096 by
   * default). Node's default, 511, overflowed in a 10,000-node restart while the new process was still
   * warming up: the kernel dropped handshakes, their clients waited out SYN retransmits (1 s, 3 s, 7 s)
   * and ~400 agents spent their whole 10 s attempt timeout before reaching the controller at all.
   * Queued connections are accepted and then capped and admitted as any other.
   */
  listenBacklog: 4096,
} as const

/** The createServer options every HTTPS listener of the controller takes from HTTP_LIMITS. */
export const SERVER_LIMIT_OPTIONS = {
  handshakeTimeout: HTTP_LIMITS.handshakeTimeoutMs,
  maxHeaderSize: HTTP_LIMITS.maxHeaderBytes,
  connectionsCheckingInterval: HTTP_LIMITS.checkIntervalMs,
  // Node would answer a missing Host header with a bare 400 before authentication; we route by path only.
  requireHostHeader: false,
} as const

/** Sets the deadlines of HTTP_LIMITS on a server (fastify ignores its timeout options with a server factory). */
export function applyServerDeadlines(server: { headersTimeout: number; requestTimeout: number; keepAliveTimeout: number; setTimeout(ms: number): unknown }): void {
  server.headersTimeout = HTTP_LIMITS.headersTimeoutMs
  server.requestTimeout = HTTP_LIMITS.requestTimeoutMs
  server.keepAliveTimeout = HTTP_LIMITS.keepAliveTimeoutMs
  server.setTimeout(HTTP_LIMITS.socketIdleTimeoutMs)
}
