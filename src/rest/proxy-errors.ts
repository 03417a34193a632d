/** The proxy's errors that a host may want to tell apart (kept apart from @discordjs/rest's types: it is optional). */

/** @discordjs/rest is not installed (or cannot be loaded): the message says what to install. */
export class RestProxyUnavailableError extends Error {
  override readonly name = 'RestProxyUnavailableError'
}
