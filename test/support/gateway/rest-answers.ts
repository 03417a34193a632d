/**
 * The bodies of the emulated REST routes' answers: small plausible Discord objects (an echo with an
 * ID), enough for a client to parse. Error bodies are Discord's: `{"message": "...", "code": n}`.
 */
import { z } from 'zod'
import type { RestRouteName } from './rest-routes.js'

/** What the gateway routes need from the emulator. */
export interface GatewayAnswers {
  readonly gatewayUrl: string
  recommendedShards(): number
  sessionStartLimit(): { total: number; remaining: number; reset_after: number; max_concurrency: number }
}

/** A status and JSON body. */
export interface Answer {
  readonly status: number
  readonly body: unknown
}

const BOT_USER_ID = '1000000000000000001'
// Discord's epoch (2015-01-01), for snowflakes whose timestamps decode sensibly.
const DISCORD_EPOCH = 1_420_070_400_000n
let increment = 0n

function snowflake(): string {
  increment = (increment + 1n) & 0xfffn
  return String(((BigInt(Date.now()) - DISCORD_EPOCH) << 22n) | increment)
}

/** Discord's error body for a plain HTTP status, e.g. `{"message": "404: Not Found", "code": 0}`. */
export function httpError(status: number, text: string): Answer {
  return { status, body: { message: `${status}: ${text}`, code: 0 } }
}

// A subset of Create Message's JSON params; anything else is refused, so a test sees a typo.
const CreateMessage = z
  .object({
    content: z.string().max(2000).optional(),
    nonce: z.union([z.string().max(25), z.number().int()]).optional(),
    tts: z.boolean().optional(),
    embeds: z.array(z.record(z.string(), z.unknown())).max(10).optional(),
    allowed_mentions: z.record(z.string(), z.unknown()).optional(),
  })
  .strict()

/** Create Message: the message, or Discord's 400 for a body it would refuse. */
export function createMessage(channelId: string, rawBody: string): Answer {
  let json: unknown
  try {
    json = JSON.parse(rawBody)
  } catch {
    return { status: 400, body: { message: 'The request body contains invalid JSON.', code: 50109 } }
  }
  const parsed = CreateMessage.safeParse(json)
  if (!parsed.success) return { status: 400, body: { message: 'Invalid Form Body', code: 50035 } }
  const { content = '', embeds = [], tts = false } = parsed.data
  if (content === '' && embeds.length === 0) return { status: 400, body: { message: 'Cannot send an empty message', code: 50006 } }
  const author = { id: BOT_USER_ID, username: 'emulator-bot', discriminator: '0', bot: true }
  return { status: 200, body: { id: snowflake(), type: 0, channel_id: channelId, author, content, embeds, tts, timestamp: new Date().toISOString() } }
}

/** The answer of a GET route (every ID exists). */
export function getAnswer(route: RestRouteName, majorId: string | null, gateway: GatewayAnswers): Answer {
  switch (route) {
    case 'get_gateway':
      return { status: 200, body: { url: gateway.gatewayUrl } }
    case 'get_gateway_bot':
      return { status: 200, body: { url: gateway.gatewayUrl, shards: gateway.recommendedShards(), session_start_limit: gateway.sessionStartLimit() } }
    case 'get_current_user':
      return { status: 200, body: { id: BOT_USER_ID, username: 'emulator-bot', discriminator: '0', bot: true } }
    case 'get_channel':
      return { status: 200, body: { id: majorId, type: 0, name: `channel-${majorId}` } }
    case 'get_channel_messages':
      return { status: 200, body: [] }
    case 'get_guild':
      return { status: 200, body: { id: majorId, name: `guild-${majorId}` } }
    case 'get_webhook':
      return { status: 200, body: { id: majorId, type: 1, name: `webhook-${majorId}` } }
    case 'create_message':
      return httpError(405, 'Method Not Allowed')
  }
}
