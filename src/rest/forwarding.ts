/** What goes from the bot's request to Discord, and from Discord's answer back to the bot. */
import type { IncomingMessage } from 'node:http'
import { REQUEST_ID_HEADER } from './gate.js'

/** Headers of Discord's answer that describe the proxy's connection or Discord's buckets, not the answer. */
const DROPPED_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'content-encoding', 'set-cookie'])

/** What goes to Discord besides the body: the bot's Authorization, content type and audit-log reason, and the tie to the held request. */
export function forwardedHeaders(req: IncomingMessage, id: string): Record<string, string> {
  const out: Record<string, string> = { authorization: req.headers.authorization!, [REQUEST_ID_HEADER]: id }
  const type = req.headers['content-type']
  if (typeof type === 'string') out['content-type'] = type
  const reason = req.headers['x-audit-log-reason']
  if (typeof reason === 'string') out['x-audit-log-reason'] = reason
  return out
}

/** Discord's headers for the bot, without connection headers and Discord's bucket headers (the proxy keeps the buckets, as @discordjs/proxy does). */
export function answerHeaders(headers: Headers, length: number): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of headers) {
    const lower = name.toLowerCase()
    if (DROPPED_HEADERS.has(lower) || lower.startsWith('x-ratelimit')) continue
    out[lower] = value
  }
  out['content-length'] = String(length)
  return out
}

/** The body as one buffer, or null when it is over `maxBytes` (reading stops); `counted` sees each chunk's size as it is kept. */
export async function readBody(req: IncomingMessage, maxBytes: number, counted: (n: number) => void): Promise<Buffer | null> {
  const declared = Number(req.headers['content-length'] ?? '0')
  if (declared > maxBytes) return null
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > maxBytes) return null
    counted(chunk.length)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
}
