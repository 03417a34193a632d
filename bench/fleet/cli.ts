/**
 * `npm run fleet -- --nodes N --shards S [options]`: the fleet simulator (see README.md). Prints a
 * progress line on stderr, the summary table on stdout; exits 0 without violations, 1 with any, 2 on a
 * bad flag, 3 when the run could not be set up. `npm run fleet -- --rolling-reboot [--kill] [options]`
 * runs the rolling reboot instead (rolling-reboot.ts), with the same output and exit codes.
 */
import { writeFile } from 'node:fs/promises'
import { handleInterrupts } from './interrupt.js'
import { HELP, parseFleetArgs, UsageError } from './options.js'
import { runFleet } from './simulator.js'
import { formatRolling } from './rolling-figures.js'
import { parseRollingArgs, ROLLING_HELP } from './rolling-options.js'
import { runRollingReboot } from './rolling-reboot.js'
import { formatSummary } from './summary.js'

async function main(): Promise<number> {
  const argv = process.argv.slice(2)
  if (argv.includes('--rolling-reboot')) return rolling(argv)
  let opts
  try {
    opts = parseFleetArgs(argv)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`fleet: ${err.message} (see --help)\n`)
    return 2
  }
  if (opts === null) {
    process.stdout.write(`${HELP}\n`)
    return 0
  }
  const summary = await runFleet(opts, {
    progress: (line) => process.stderr.write(`${line}\n`),
    info: (line) => process.stderr.write(`${line}\n`),
  })
  process.stdout.write(`${formatSummary(summary).join('\n')}\n`)
  if (opts.json !== null) await writeFile(opts.json, `${JSON.stringify(summary, null, 2)}\n`)
  const total = Object.values(summary.violationsByKind).reduce((a, b) => a + b, 0)
  return total === 0 ? 0 : 1
}

/** The rolling reboot: its own flags (rolling-options.ts), its own table. */
async function rolling(argv: readonly string[]): Promise<number> {
  let ro
  try {
    ro = parseRollingArgs(argv)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`fleet --rolling-reboot: ${err.message} (see --rolling-reboot --help)\n`)
    return 2
  }
  if (ro === null) {
    process.stdout.write(`${ROLLING_HELP}\n`)
    return 0
  }
  const quiet = !ro.fleet.progress
  const summary = await runRollingReboot(ro, { progress: () => undefined, info: (line) => quiet || process.stderr.write(`${line}\n`) })
  process.stdout.write(`${formatRolling(summary).join('\n')}\n`)
  if (ro.fleet.json !== null) await writeFile(ro.fleet.json, `${JSON.stringify(summary, null, 2)}\n`)
  const total = Object.values(summary.violationsByKind).reduce((a, b) => a + b, 0)
  return total === 0 ? 0 : 1
}

handleInterrupts('fleet')
main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`fleet: the run could not be carried out: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exit(3)
  },
)
