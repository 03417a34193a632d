/** Checks of operator input, done before anything is written; each failure is one UsageError sentence. */
import { isIP } from 'node:net'
import { nameProblem } from '../src/core/names.js'
import { CLIENT_ROLES } from './index-file.js'
import type { ClientRole } from './index-file.js'
import { printable } from './serial.js'
import { UsageError } from './errors.js'

/** Upper bound of any lifetime in days (100 years), to catch typos. */
export const MAX_DAYS = 36_500

/** Checks a name against the project's one name rule. */
export function checkName(value: string, what = 'name'): string {
  const problem = nameProblem(value)
  if (problem !== null) throw new UsageError(`invalid ${what} "${printable(value)}": ${problem}`)
  return value
}

/** Checks a `--role` value. */
export function checkRole(value: string | undefined): ClientRole {
  if (value === undefined) throw new UsageError('missing --role (node, operator or signer)')
  if (!(CLIENT_ROLES as readonly string[]).includes(value)) {
    throw new UsageError(`invalid role "${printable(value)}": use node, operator or signer`)
  }
  return value as ClientRole
}

/** Checks a day count (a whole number from 1 to MAX_DAYS). */
export function checkDays(value: number, flag: string): number {
  if (!Number.isSafeInteger(value) || value < 1 || value > MAX_DAYS) {
    throw new UsageError(`invalid ${flag} ${String(value)}: expected a whole number of days from 1 to ${MAX_DAYS}`)
  }
  return value
}

/** Parses a decimal integer flag value strictly ("12" yes; "12x", "1e3", "" no). */
export function parseIntFlag(value: string, flag: string): number {
  if (!/^[0-9]{1,9}$/.test(value)) throw new UsageError(`invalid ${flag} "${printable(value)}": expected a whole number`)
  return Number.parseInt(value, 10)
}

const DNS_LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/

/** Checks a DNS name for a server certificate SAN (no wildcards). */
export function checkDnsName(value: string): string {
  const labels = value.split('.')
  if (value.length > 253 || !labels.every((l) => DNS_LABEL.test(l))) {
    throw new UsageError(`invalid DNS name "${printable(value)}"`)
  }
  return value.toLowerCase()
}

/** Checks an IPv4 or IPv6 address for a server certificate SAN. */
export function checkIp(value: string): string {
  if (isIP(value) === 0) throw new UsageError(`invalid IP address "${printable(value)}"`)
  return value
}
