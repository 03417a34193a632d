/**
 * The security headers every response carries. helmet sets them on every response fastify renders; the
 * few answers Node's HTTP parser forces before fastify sees a request (client-error.ts) carry them too.
 */
export const HSTS_MAX_AGE_SECONDS = 31_536_000

/** What helmet is configured to send (app.ts) and what raw answers copy. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'strict-transport-security': `max-age=${HSTS_MAX_AGE_SECONDS}; includeSubDomains`,
  'content-security-policy': "default-src 'none';frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
}
