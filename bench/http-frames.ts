/**
 * The answer framing both bench load generators read off a raw TLS socket (bench/mtls-client.ts and
 * bench/fleet/scale/raw-connection.ts): just the status line, Content-Length and the body. node:https
 * would cost a generator about as much CPU as the server spends per request.
 */
const HEADER_END = Buffer.from('\r\n\r\n', 'latin1')
const CONTENT_LENGTH = /\r\ncontent-length:\s*(\d+)/i

/** One complete answer and the bytes after it. */
export interface Frame {
  readonly status: number
  readonly body: Buffer
  readonly rest: Buffer
}

/**
 * The first complete answer in `buffer`; null while more bytes are needed; an Error for an answer
 * without Content-Length (the connection is then unusable).
 */
export function takeFrame(buffer: Buffer): Frame | null | Error {
  const headerEnd = buffer.indexOf(HEADER_END)
  if (headerEnd < 0) return null
  const head = buffer.toString('latin1', 0, headerEnd)
  const length = CONTENT_LENGTH.exec(head)
  if (!length) return new Error(`an answer without Content-Length: ${head.split('\r\n')[0]}`)
  const start = headerEnd + HEADER_END.length
  const end = start + Number(length[1])
  if (buffer.length < end) return null
  return { status: Number(head.slice(9, 12)), body: buffer.subarray(start, end), rest: buffer.subarray(end) }
}
