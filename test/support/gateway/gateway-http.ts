/**
 * The HTTP side of the emulator, on the gateway's port: `GET /api/v10/gateway` and `GET
 * /api/v10/gateway/bot` (developers/events/gateway.mdx, "Get Gateway", "Get Gateway Bot"), the latter
 * only with `Authorization: Bot <token>`. @discordjs/ws fetches it through @discordjs/rest, which
 * builds `${api}/v10/gateway/bot`: a REST whose `api` is `emulator.apiUrl` lands here.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

/** What the HTTP side needs from the emulator. */
export interface HttpHost {
  readonly gatewayUrl: string
  currentToken(): string
  recommendedShards(): number
  sessionStartLimit(): { total: number; remaining: number; reset_after: number; max_concurrency: number }
  countGatewayBotRequest(): void
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

// Discord's error body: {"message": "401: Unauthorized", "code": 0}.
function error(res: ServerResponse, status: number, message: string): void {
  answer(res, status, { message: `${status}: ${message}`, code: 0 })
}

/** The request handler. */
export function gatewayHttpHandler(host: HttpHost): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const path = new URL(req.url ?? '/', 'http://emulator').pathname
    if (path !== '/api/v10/gateway' && path !== '/api/v10/gateway/bot') return error(res, 404, 'Not Found')
    if (req.method !== 'GET') return error(res, 405, 'Method Not Allowed')
    if (path === '/api/v10/gateway') return answer(res, 200, { url: host.gatewayUrl })
    host.countGatewayBotRequest()
    if (req.headers.authorization !== `Bot ${host.currentToken()}`) return error(res, 401, 'Unauthorized')
    answer(res, 200, { url: host.gatewayUrl, shards: host.recommendedShards(), session_start_limit: host.sessionStartLimit() })
  }
}
