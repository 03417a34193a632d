/**
 * Which guilds a session serves: guild g goes to shard (g >> 22) % S of a session started with shard
 * count S. Sessions (a of Sa) and (b of Sb) serve a common guild iff a ≡ b (mod gcd(Sa, Sb)) (Chinese
 * remainder theorem; g >> 22 spans 2^42 values, more than any lcm of two counts up to 65,536). Pure.
 */

/** Greatest common divisor of two positive integers. */
export function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b]
  return a
}

/** True when shard `a` of `countA` and shard `b` of `countB` serve at least one common guild. */
export function shareGuilds(a: number, countA: number, b: number, countB: number): boolean {
  return (a - b) % gcd(countA, countB) === 0
}

/** The smallest `g >> 22` served by both sessions (the witness a finding names), or null when none. */
export function commonGuild(a: number, countA: number, b: number, countB: number): number | null {
  if (!shareGuilds(a, countA, b, countB)) return null
  // x = a + k·countA for k < countB / gcd: at most 65,536 steps, and only for a finding.
  const steps = countB / gcd(countA, countB)
  for (let k = 0, x = a; k < steps; k++, x += countA) if (x % countB === b) return x
  return null
}
