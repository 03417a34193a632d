/**
 * The answers the proxy gives itself, without asking Discord. Each names the reason in the
 * `x-pxe-rest-proxy` header, so that an operator can tell them from Discord's; a 429 is shaped like
 * Discord's (`message`, `retry_after` in seconds, `global`), with `Retry-After`, so that a bot's REST
 * client waits and tries again as it would for Discord.
 */
import type { ServerResponse } from 'node:http'

/** Why the proxy answered by itself (the header's value). */
export type ProxyReason = 'no_auth' | 'invalid_budget' | 'queue_full' | 'held_too_long' | 'no_share' | 'bad_request' | 'not_found' | 'method_not_allowed' | 'body_too_large' | 'upstream_error' | 'upstream_timeout' | 'closing'

/** Writes a JSON answer; `close`: the request's body may not have been read, so the connection ends. */
export function sendProxyReply(res: ServerResponse, status: number, reason: ProxyReason, body: Record<string, unknown>, retryAfterS?: number, close = false): void {
  if (res.headersSent || res.destroyed) return
  const text = JSON.stringify(body)
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    'x-pxe-rest-proxy': reason,
    ...(retryAfterS === undefined ? {} : { 'retry-after': String(retryAfterS) }),
    ...(close ? { connection: 'close' } : {}),
  })
  res.end(text)
}

/** A Discord-shaped 429: the bot's client waits `retryAfterS` and sends again. */
export function sendRateLimited(res: ServerResponse, reason: ProxyReason, message: string, retryAfterS: number, close = false): void {
  const seconds = Math.max(1, Math.ceil(retryAfterS))
  sendProxyReply(res, 429, reason, { message, retry_after: seconds, global: false, code: 0 }, seconds, close)
}

/** Any other refusal: `{message, code: 0}` as Discord's errors carry. */
export function sendRefusal(res: ServerResponse, status: number, reason: ProxyReason, message: string, retryAfterS?: number, close = false): void {
  sendProxyReply(res, status, reason, { message, code: 0 }, retryAfterS, close)
}
