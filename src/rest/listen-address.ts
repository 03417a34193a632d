/** The proxy's listen address (`HOST:PORT`) and its upstream URL, checked with a message that says what to fix. */
import { isIP } from 'node:net'
import { isLoopbackHost } from '../net/host.js'

/** Where the proxy listens. */
export interface ListenAddress {
  readonly host: string
  readonly port: number
}

const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/

/** Parses `HOST:PORT` (IPv6 in brackets: `[::1]:8081`; port 0: a free one); throws RangeError naming the problem. */
export function parseListenAddress(value: string): ListenAddress {
  const shown = JSON.stringify(value.slice(0, 64))
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):([^:]*)$/.exec(value)
  if (m === null) throw new RangeError(`${shown} is not HOST:PORT (e.g. 127.0.0.1:8081, [::1]:8081)`)
  const host = m[1] ?? m[2]!
  if (m[1] !== undefined ? isIP(host) !== 6 : !(isIP(host) === 4 || HOST_NAME.test(host))) throw new RangeError(`${shown}: ${JSON.stringify(host.slice(0, 64))} is not a host name or IP address`)
  const port = m[3]!
  if (!/^\d{1,5}$/.test(port) || Number(port) > 65_535) throw new RangeError(`${shown}: the port must be an integer in 0..65535 (0: a free one)`)
  return { host, port: Number(port) }
}

/** True when the proxy would be reachable from other machines (allowed, but worth a warning: anyone who reaches it spends the bot's budget). */
export function isRemoteListen(address: ListenAddress): boolean {
  return !isLoopbackHost(address.host)
}

/** Why `url` cannot be the upstream (Discord's API base), or null. Plain http only to loopback: the bot's token rides in it. */
export function upstreamProblem(url: string): string | null {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return 'is not a URL'
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return 'must be an https:// URL'
  if (parsed.protocol === 'http:' && !isLoopbackHost(parsed.hostname.replace(/^\[|\]$/g, ''))) return 'may be plain http:// only on loopback (the bot token travels in it)'
  if (parsed.username !== '' || parsed.password !== '') return 'must not carry credentials'
  if (parsed.search !== '' || parsed.hash !== '') return 'must not carry a query or fragment'
  return null
}
