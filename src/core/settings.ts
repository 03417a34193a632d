/** Checks of ControllerSettings, so that a bad configuration fails at construction, not mid-request. */
import { allowedHostProblem } from './resume-url.js'
import type { ControllerSettings } from './types.js'

function assertInt(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer in ${min}..${max} (got ${String(value)})`)
  }
}

/** Throws a RangeError naming the first setting that is out of range or inconsistent. */
export function assertValidSettings(settings: ControllerSettings): void {
  assertInt('total_shards', settings.totalShards, 1, 65536)
  assertInt('max_concurrency', settings.maxConcurrency, 1, 65536)
  if (settings.maxConcurrency > 1 && settings.totalShards % settings.maxConcurrency !== 0) {
    throw new RangeError(
      `total_shards (${settings.totalShards}) must be a multiple of max_concurrency (${settings.maxConcurrency})`,
    )
  }
  assertInt('lease_seconds', settings.leaseSeconds, 1, 86_400)
  assertInt('identify_interval_ms', settings.identifyIntervalMs, 0, 86_400_000)
  if (settings.dailyIdentifyLimit !== null) {
    assertInt('daily_identify_limit', settings.dailyIdentifyLimit, 1, 1_000_000_000)
  }
  if (settings.rest !== undefined) {
    assertInt('rest.global_per_second', settings.rest.globalPerSecond, 1, 100_000)
    assertInt('rest.invalid_per_10_minutes', settings.rest.invalidPer10Minutes, 1, 10_000_000)
    const { safety } = settings.rest
    if (!(safety > 0 && safety <= 1)) throw new RangeError(`rest.safety must be a number above 0 and at most 1 (got ${String(safety)})`)
  }
  if (settings.sessionHandoff !== undefined) {
    assertInt('session_handoff.ttl_seconds', settings.sessionHandoff.ttlSeconds, 1, 300)
    for (const host of settings.sessionHandoff.allowedHosts) {
      const problem = allowedHostProblem(host)
      if (problem !== null) throw new RangeError(`session_handoff.allowed_hosts: ${JSON.stringify(host.slice(0, 64))} ${problem}`)
    }
  }
}
