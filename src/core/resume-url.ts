/**
 * Which `resume_url` a deposited session may carry (SPEC "Session handoff"). The new owner connects
 * there with the bot token, so a node must never be able to send another node to a host of its
 * choosing: only hosts the operator's `session_handoff.allowed_hosts` admits, `wss://` only (plain
 * `ws://` solely for a loopback host the list names: tests and local emulators), and nothing in the URL
 * but scheme, host and (for a loopback host only) a port. The host must be a plain DNS name or an
 * address, so that no consumer parses it differently (a start command may hand `PXE_RESUME_URL` to a
 * shell), and what is handed to the next owner is the URL rebuilt from its parts, never the raw input.
 * Pure: WHATWG URL parsing only.
 */

/** The hosts Discord's gateway answers on (the SPEC's default). */
export const DEFAULT_ALLOWED_RESUME_HOSTS: readonly string[] = Object.freeze(['gateway.discord.gg', '*.discord.gg'])

const LABEL = '(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)'
const HOST_NAME = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`)
const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/

/** A DNS name as WHATWG URL leaves it: letters, digits and inner hyphens, and a last label that is not a number (that would be an IPv4 form). */
function isDnsName(host: string): boolean {
  return HOST_NAME.test(host) && !/^\d+$/.test(host.slice(host.lastIndexOf('.') + 1))
}

/** True for `localhost`, `[::1]` and 127.0.0.0/8, as WHATWG URL writes hostnames. */
function isLoopbackHostname(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || (IPV4.test(hostname) && hostname.startsWith('127.'))
}

/**
 * Why `entry` cannot be an allowed_hosts entry, or null. An entry is a lower-case DNS name, an IPv4
 * address, `[::1]`, or `*.` followed by a DNS name of at least two labels (a wildcard over a whole
 * top-level domain, over everything, or over addresses would admit hosts anyone can hold).
 */
export function allowedHostProblem(entry: string): string | null {
  if (entry === '[::1]' || IPV4.test(entry)) return null
  if (entry.startsWith('*.')) {
    const suffix = entry.slice(2)
    if (!isDnsName(suffix)) return 'a wildcard must be "*." followed by a lower-case host name'
    if (!suffix.includes('.')) return 'a wildcard must name at least two labels after "*." (e.g. "*.discord.gg"), not a whole top-level domain'
    return null
  }
  if (!isDnsName(entry)) return 'must be a lower-case host name, an IPv4 address, [::1], or "*." and a host name'
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

/** A resume URL parsed and checked against every rule but the allowed hosts: its canonical form, or the problem. */
export function parseResumeUrl(value: string): { readonly url: string; readonly hostname: string; readonly protocol: 'ws:' | 'wss:' } | { readonly problem: string } {
  if (value.length > 256) return { problem: 'must be at most 256 characters' }
  // The WHATWG parser silently drops tabs and newlines and turns "\" into "/": accept only text that
  // means exactly what it says.
  if (!/^[\x21-\x5b\x5d-\x7e]+$/.test(value)) return { problem: 'must be printable ASCII without spaces or backslashes' }
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return { problem: 'is not a URL' }
  }
  if (url.protocol !== 'wss:' && url.protocol !== 'ws:') return { problem: 'must be a wss:// URL' }
  if (url.username !== '' || url.password !== '') return { problem: 'must not carry a user name or password' }
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || value.includes('?') || value.includes('#')) {
    return { problem: 'must be scheme, host and port only (no path, query or fragment)' }
  }
  const hostname = url.hostname
  if (!isDnsName(hostname) && !IPV4.test(hostname) && hostname !== '[::1]') return { problem: 'must name a plain host (letters, digits, dots and hyphens) or an address' }
  if (url.port !== '' && !isLoopbackHostname(hostname)) return { problem: 'must not name a port (only a loopback host may)' }
  return { url: `${url.protocol}//${url.host}`, hostname, protocol: url.protocol }
}

/** Why a deposited `resume_url` is refused, or null when the allowed hosts admit it. Never quotes it. */
export function resumeUrlProblem(value: string, allowedHosts: readonly string[]): string | null {
  const parsed = parseResumeUrl(value)
  if ('problem' in parsed) return parsed.problem
  if (!admitted(parsed.hostname, allowedHosts)) return 'names a host that session_handoff.allowed_hosts does not admit'
  if (parsed.protocol === 'ws:' && !(isLoopbackHostname(parsed.hostname) && allowedHosts.includes(parsed.hostname))) {
    return 'must be wss:// (ws:// only to a loopback host that session_handoff.allowed_hosts names)'
  }
  return null
}

/** The form a checked resume URL is held and handed out in: rebuilt from its parts (scheme, host, port). */
export function canonicalResumeUrl(value: string): string {
  const parsed = parseResumeUrl(value)
  if ('problem' in parsed) throw new RangeError(`resume_url ${parsed.problem}`) // checked before: never here
  return parsed.url
}
