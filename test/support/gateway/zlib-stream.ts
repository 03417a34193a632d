/**
 * `compress=zlib-stream` transport compression (developers/events/gateway.mdx, "Transport
 * Compression"): one zlib context for the whole connection, every payload flushed with Z_SYNC_FLUSH so
 * each WebSocket message ends in `00 00 ff ff`. @discordjs/ws's `compression` option asks for it.
 */
import { constants, createDeflate, type Deflate } from 'node:zlib'

/** Compresses payloads in order into one shared context; `send` gets each flushed message. */
export class ZlibStreamEncoder {
  private readonly deflate: Deflate = createDeflate()
  private pending: Buffer[] = []
  private chain: Promise<void> = Promise.resolve()

  constructor(private readonly send: (message: Buffer) => void) {
    this.deflate.on('data', (chunk: Buffer) => this.pending.push(chunk))
    this.deflate.on('error', () => undefined)
  }

  /** Queues `text`; messages leave in the order they were queued. */
  push(text: string): void {
    this.then(
      () =>
        new Promise<void>((resolve) => {
          this.deflate.write(text)
          this.deflate.flush(constants.Z_SYNC_FLUSH, () => {
            // Output pushed before the flush completed may still be on its way to 'data' through
            // nextTick: one setImmediate lets it all arrive before the message is cut.
            setImmediate(() => {
              const message = Buffer.concat(this.pending)
              this.pending = []
              this.send(message)
              resolve()
            })
          })
        }),
    )
  }

  /** Runs `step` after every message queued so far has been sent (a close must not overtake them). */
  then(step: () => void | Promise<void>): void {
    this.chain = this.chain.then(step).catch(() => undefined)
  }

  close(): void {
    this.deflate.close()
  }
}
