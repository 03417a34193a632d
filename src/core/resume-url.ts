/**
 * Which `resume_url` a deposited session may carry (SPEC "Session handoff"). The new owner connects
 * there with the bot token, so a node must never be able to send another node to a host of its
 * choosing: only hosts the operator's `session_handoff.allowed_hosts` admits, `wss://` only (plain
 * `ws://` solely for a loopback host the list names: tests and local emulators), and nothing in the
 * URL but scheme, host and port. Pure: WHATWG URL parsing only.
 */

/** The hosts Discord's gateway answers on (the SPEC's default). */
export const DEFAULT_ALLOWED_RESUME_HOSTS: readonly string[] = Object.freeze(['gateway.discord.gg', '*.discord.gg'])

const LABEL = '(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)'
const HOST_NAME = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`)
const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/

/** True for `localhost`, `[::1]` and 127.0.0.0/8, as WHATWG URL writes hostnames. */
function isLoopbackHostname(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || (IPV4.test(hostname) && hostname.startsWith('127.'))
}

/**
 * Why `entry` cannot be an allowed_hosts entry, or null. An entry is a lower-case host name, an IPv4
 * address, `[::1]`, or `*.` followed by a name of at least two labels (a wildcard over a whole
 * top-level domain, or everything, would admit hosts anyone can register).
 */
export function allowedHostProblem(entry: string): string | null {
  if (entry === '[::1]' || IPV4.test(entry)) return null
  if (entry.startsWith('*.')) {
    const suffix = entry.slice(2)
    if (!HOST_NAME.test(suffix)) return 'a wildcard must be "*." followed by a lower-case host name'
    if (!suffix.includes('.')) return 'a wildcard must name at least two labels after "*." (e.g. "*.discord.gg"), not a whole top-level domain'
    return null
  }
  if (!HOST_NAME.test(entry)) return 'must be a lower-case host name, an IPv4 address, [::1], or "*." and a host name'
  return null
}

function admitted(hostname: string, allowedHosts: readonly string[]): boolean {
  for (const entry of allowedHosts) {
    if (entry === hostname) return true
    // "*.discord.gg" admits "a.discord.gg" and "a.b.discord.gg", never "discord.gg" or "evildiscord.gg"
    if (entry.startsWith('*.') && hostname.length > entry.length - 1 && hostname.endsWith(entry.slice(1))) return true
  }
  return false
}

/** Why a deposited `resume_url` is refused, or null when the allowed hosts admit it. Never quotes it. */
export function resumeUrlProblem(value: string, allowedHosts: readonly string[]): string | null {
  // The WHATWG parser silently drops tabs and newlines and turns "\" into "/": accept only text that
  // means exactly what it says.
  if (!/^[\x21-\x5b\x5d-\x7e]+$/.test(value)) return 'must be printable ASCII without spaces or backslashes'
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return 'is not a URL'
  }
  if (url.protocol !== 'wss:' && url.protocol !== 'ws:') return 'must be a wss:// URL'
  if (url.username !== '' || url.password !== '') return 'must not carry a user name or password'
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || value.includes('?') || value.includes('#')) {
    return 'must be scheme, host and port only (no path, query or fragment)'
  }
  const hostname = url.hostname
  if (!admitted(hostname, allowedHosts)) return 'names a host that session_handoff.allowed_hosts does not admit'
  if (url.protocol === 'ws:' && !(isLoopbackHostname(hostname) && allowedHosts.includes(hostname))) {
    return 'must be wss:// (ws:// only to a loopback host that session_handoff.allowed_hosts names)'
  }
  return null
}
