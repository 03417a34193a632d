/**
 * The key a source address is counted under, wherever the controller limits per source: IPv4 as is,
 * IPv6 by its /64 prefix, the smallest block a single site is normally given (a host can rotate
 * through the 2^64 addresses of its /64 at will, so counting per address would limit nothing).
 */

/** IPv4 as is (IPv4-mapped IPv6 unwrapped), IPv6 as `<first four groups>::/64`. */
export function addressKey(address: string | undefined): string {
  if (address === undefined) return 'unknown'
  if (address.startsWith('::ffff:') && address.includes('.')) return address.slice(7) // IPv4-mapped
  if (!address.includes(':')) return address
  const [head = '', tail = ''] = address.split('::', 2)
  const left = head === '' ? [] : head.split(':')
  const right = address.includes('::') ? (tail === '' ? [] : tail.split(':')) : []
  const groups = address.includes('::') ? [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right] : left
  return `${groups.slice(0, 4).map((g) => Number.parseInt(g || '0', 16).toString(16)).join(':')}::/64`
}
