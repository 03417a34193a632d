/**
 * The REST routes the emulator serves, as data: a few of Discord's, each with its method, path
 * template, major parameter and bucket. "Per-route rate limits often account for top-level resources
 * within the path ... channels (channel_id), guilds (guild_id), and webhooks" (rate-limits.mdx): a
 * bucket's state is kept per route and major parameter value, so /channels/1 and /channels/2 never
 * share one. Discord does not publish its limits ("should not be hard coded"); these are the ones
 * bots commonly observe (5 messages per 5 s per channel) and round figures for the rest.
 */
import type { BucketLimit } from './rest-options.js'

/** The names of the emulated routes (also the keys of `rest.routeLimits`). */
export type RestRouteName =
  | 'get_gateway'
  | 'get_gateway_bot'
  | 'get_current_user'
  | 'get_channel'
  | 'get_channel_messages'
  | 'create_message'
  | 'get_guild'
  | 'get_webhook'

/** Which top-level resource a route's bucket is kept per. */
export type MajorParameter = 'channel_id' | 'guild_id' | 'webhook_id'

/** One route. */
export interface RestRoute {
  readonly name: RestRouteName
  readonly method: 'GET' | 'POST'
  /** Discord's path template after /api/v10, as its docs write it. */
  readonly template: string
  readonly major: MajorParameter | null
  /** Whether the route needs `Authorization: Bot <token>` (GET /gateway does not). */
  readonly auth: boolean
  /** The default bucket, or null for routes the emulator keeps no bucket for. */
  readonly bucket: BucketLimit | null
}

const perSecond = (limit: number): BucketLimit => ({ limit, windowMs: 1000 })

/** The route table. GET /gateway/bot keeps no bucket, so the gateway side answers as before. */
export const REST_ROUTES: readonly RestRoute[] = [
  { name: 'get_gateway', method: 'GET', template: '/gateway', major: null, auth: false, bucket: null },
  { name: 'get_gateway_bot', method: 'GET', template: '/gateway/bot', major: null, auth: true, bucket: null },
  { name: 'get_current_user', method: 'GET', template: '/users/@me', major: null, auth: true, bucket: perSecond(5) },
  { name: 'get_channel', method: 'GET', template: '/channels/{channel_id}', major: 'channel_id', auth: true, bucket: perSecond(5) },
  { name: 'get_channel_messages', method: 'GET', template: '/channels/{channel_id}/messages', major: 'channel_id', auth: true, bucket: perSecond(5) },
  { name: 'create_message', method: 'POST', template: '/channels/{channel_id}/messages', major: 'channel_id', auth: true, bucket: { limit: 5, windowMs: 5000 } },
  { name: 'get_guild', method: 'GET', template: '/guilds/{guild_id}', major: 'guild_id', auth: true, bucket: perSecond(5) },
  { name: 'get_webhook', method: 'GET', template: '/webhooks/{webhook_id}', major: 'webhook_id', auth: true, bucket: perSecond(5) },
]

/** What a request path and method come to. */
export type RouteMatch =
  | { readonly kind: 'route'; readonly route: RestRoute; readonly majorId: string | null }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'method_not_allowed' }

const API_PREFIX = '/api/v10'
// Snowflakes are unsigned 64-bit integers written in decimal.
const SNOWFLAKE = '(\\d{1,20})'

function patternOf(template: string): RegExp {
  const escaped = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&')
  return new RegExp(`^${escaped.replace(/\{[a-z_]+\}/g, SNOWFLAKE)}$`)
}

const COMPILED = REST_ROUTES.map((route) => ({ route, pattern: patternOf(route.template) }))

/** The route a request names: a route with its major parameter's value, or why there is none. */
export function matchRoute(method: string, pathname: string): RouteMatch {
  if (!pathname.startsWith(`${API_PREFIX}/`)) return { kind: 'not_found' }
  const path = pathname.slice(API_PREFIX.length)
  let pathKnown = false
  for (const { route, pattern } of COMPILED) {
    const m = pattern.exec(path)
    if (!m) continue
    pathKnown = true
    if (route.method === method) return { kind: 'route', route, majorId: m[1] ?? null }
  }
  return pathKnown ? { kind: 'method_not_allowed' } : { kind: 'not_found' }
}

/** The bucket a route uses: an override from the options, else the table's. */
export function bucketOf(route: RestRoute, overrides: Partial<Record<RestRouteName, BucketLimit>>): BucketLimit | null {
  return route.bucket ? (overrides[route.name] ?? route.bucket) : null
}
