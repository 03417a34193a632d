/**
 * The one timeline of a fleet run. `process.hrtime` reads CLOCK_MONOTONIC, which every process on the
 * machine shares (it does not jump with the wall clock and keeps counting while a process is stopped),
 * so a stop recorded in one worker and the next owner's start recorded in another are comparable.
 */

/** Milliseconds on the machine-wide monotonic clock (fractional). */
export function sharedNow(): number {
  return Number(process.hrtime.bigint()) / 1e6
}
