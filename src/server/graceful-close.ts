/**
 * The mTLS app's part of a graceful stop: stop accepting, close idle keep-alive connections at once,
 * let requests in flight finish, and after `graceMs` cut whatever is still open (a stuck or very slow
 * client must not hold the stop). fastify's `forceCloseConnections: 'idle'` does the first two.
 */
import type { FastifyInstance } from 'fastify'

/**
 * Answers sent once a stop began say `Connection: close`, so that the connection of a request
 * that was in flight at the stop ends with its answer instead of idling until the grace period cuts it.
 * (fastify does this itself only for requests that arrive after the stop began.)
 */
export function installCloseAfterStop(app: FastifyInstance): void {
  let closing = false
  app.addHook('preClose', (done) => {
    closing = true
    done()
  })
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) void reply.header('connection', 'close')
    done(null, payload)
  })
}

/** Closes `app` within `graceMs`; resolves with how many connections had to be cut at the deadline. */
export async function closeGracefully(app: FastifyInstance, graceMs: number, openConnections: () => number): Promise<number> {
  let cut = 0
  const deadline = setTimeout(() => {
    cut = openConnections()
    app.server.closeAllConnections()
  }, graceMs)
  try {
    await app.close()
  } finally {
    clearTimeout(deadline)
  }
  return cut
}
