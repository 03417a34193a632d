/** Host names and addresses: what counts as loopback, and how a host goes into a URL. */
import { isIP } from 'node:net'

const LOOPBACK_NAMES = new Set(['localhost', '::1'])

/** True for `localhost`, `::1` and any IPv4 address in 127.0.0.0/8 (development mode and the ops default rule). */
export function isLoopbackHost(host: string): boolean {
  return LOOPBACK_NAMES.has(host) || (isIP(host) === 4 && host.startsWith('127.'))
}

/** The host as it appears in a URL: IPv6 addresses in brackets. */
export function hostForUrl(host: string): string {
  return isIP(host) === 6 ? `[${host}]` : host
}
