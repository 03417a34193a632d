/** Which Discord API request a request to the proxy is: method, API version, route and query. */

/** The methods @discordjs/rest sends (and Discord's API uses). */
const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'])

/** A request the proxy may forward. */
export interface ApiRoute {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  /** The API version in the path (`/api/v10/...` → '10'), or null for an unversioned path. */
  readonly version: string | null
  /** The route after `/api[/vN]`, e.g. `/channels/123/messages`. */
  readonly fullRoute: `/${string}`
  readonly query: URLSearchParams
}

/** Why a request cannot be forwarded: the status and a message. */
export interface RouteProblem {
  readonly status: 404 | 405
  readonly message: string
}

/** Parses the method and the request target; a path outside `/api/` is not Discord's API. */
export function apiRouteOf(method: string | undefined, target: string | undefined): ApiRoute | RouteProblem {
  if (method === undefined || !METHODS.has(method)) return { status: 405, message: `the method is not one of ${[...METHODS].join(', ')}` }
  let url: URL
  try {
    url = new URL(target ?? '', 'http://proxy.invalid')
  } catch {
    return { status: 404, message: 'not a request target' }
  }
  const m = /^\/api(?:\/v(\d{1,2}))?(\/[^]+)$/.exec(url.pathname)
  if (m === null) return { status: 404, message: "not a Discord API path: point the bot's REST client at http://HOST:PORT/api" }
  return { method: method as ApiRoute['method'], version: m[1] ?? null, fullRoute: m[2] as `/${string}`, query: url.searchParams }
}
