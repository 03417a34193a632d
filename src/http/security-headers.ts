/**
 * The security headers every response carries, whoever writes it: fastify's routes and errors, and the
 * answers written before any hook runs (Node's parser refusals in client-error.ts, router refusals and
 * unmet Expect headers in early-answers.ts). @fastify/helmet stays their source, but it recomputes them
 * on every response (two hooks and a middleware per request); they never change, so helmet runs once at
 * start-up on a throwaway instance and its header set is kept.
 */
import fastify from 'fastify'
import helmet from '@fastify/helmet'

export const HSTS_MAX_AGE_SECONDS = 31_536_000

/** helmet's configuration: its defaults, with HSTS and a CSP fit for a JSON API. */
export const HELMET_OPTIONS = {
  hsts: { maxAge: HSTS_MAX_AGE_SECONDS, includeSubDomains: true },
  // A JSON API loads nothing: helmet's default directives (scripts, styles, fonts) do not apply.
  contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
} as const

/** Headers of a response that are about its body or connection, not its security. */
const NOT_SECURITY = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive', 'transfer-encoding'])

let captured: Readonly<Record<string, string>> | null = null

/** Runs helmet once on a throwaway instance and keeps the headers it set (idempotent). */
export async function captureSecurityHeaders(): Promise<Readonly<Record<string, string>>> {
  if (captured !== null) return captured
  const probe = fastify()
  await probe.register(helmet, HELMET_OPTIONS)
  probe.get('/', async () => ({}))
  const res = await probe.inject({ method: 'GET', url: '/' })
  await probe.close()
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(res.headers)) {
    if (!NOT_SECURITY.has(name) && value !== undefined) headers[name] = String(value)
  }
  if (!('strict-transport-security' in headers) || !('content-security-policy' in headers)) {
    throw new Error('helmet did not produce HSTS and CSP headers: refusing to serve without them')
  }
  captured = Object.freeze(headers)
  return captured
}

/** The captured set (captureSecurityHeaders must have run: buildApp does it before anything listens). */
export function securityHeaders(): Readonly<Record<string, string>> {
  if (captured === null) throw new Error('security headers used before captureSecurityHeaders()')
  return captured
}
