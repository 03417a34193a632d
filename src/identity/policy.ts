/** Authorization as data: which roles may call which endpoint. Anything not listed is denied. */
import type { Role } from './principal.js'

const ROLES_BY_ENDPOINT = {
  'POST /v1/checkin': ['node'],
  'POST /v1/identify': ['node'],
  'GET /v1/route/:guild_id': ['node', 'operator'],
  'GET /v1/keys': ['node', 'operator'],
  'GET /v1/plan': ['operator'],
  'POST /v1/nodes/:node_id/drain': ['operator'],
  'POST /v1/crl': ['operator', 'signer'],
  'POST /v1/renew': ['node'],
  'GET /v1/renew/:request_id': ['node'],
  'GET /v1/enroll/requests': ['signer'],
  'POST /v1/enroll/requests/:request_id': ['signer'],
  'GET /v1/enroll/queue': ['operator'],
  'POST /v1/reshard': ['operator'],
  'DELETE /v1/reshard': ['operator'],
} as const satisfies Readonly<Record<string, readonly Role[]>>

/** An endpoint of the mTLS API, `METHOD /route/pattern` (the API reference must describe each one). */
export type Endpoint = keyof typeof ROLES_BY_ENDPOINT

export const ENDPOINT_ROLES: Readonly<Record<string, readonly Role[]>> = ROLES_BY_ENDPOINT

/** Roles allowed on a route (method + route pattern), or null when the route is not in the table. */
export function rolesFor(method: string, routePattern: string): readonly Role[] | null {
  return ENDPOINT_ROLES[`${method} ${routePattern}`] ?? null
}
