/**
 * `npm run bench [-- --only core|moves|planner|state|mtls|issuance|ha|enroll|rest]` (planner: an alias of
 * moves): prints every benchmark section (or the one named). The rest section runs only when named (two
 * runs of `--minutes M` each, default 3).
 */
import { parseArgs } from 'node:util'
import { runCoreBench } from './core-bench.js'
import { runEnrollBench } from './enroll-bench.js'
import { runHaBench } from './ha-bench.js'
import { runIssuanceBench } from './issuance-bench.js'
import { runMtlsBench } from './mtls-bench.js'
import { runPlannerBench } from './planner-bench.js'
import { parseMinutes, runRestBench } from './rest/rest-bench.js'
import { runStateBench } from './state-bench.js'

const { values } = parseArgs({ options: { only: { type: 'string' }, minutes: { type: 'string' } }, strict: true, allowPositionals: false })
let restMinutes: number
try {
  if (values.minutes !== undefined && values.only !== 'rest') throw new RangeError('--minutes goes with --only rest')
  restMinutes = parseMinutes(values.minutes)
} catch (err) {
  process.stderr.write(`bench: ${(err as Error).message}\n`)
  process.exit(2)
}

const SECTIONS = { core: runCoreBench, moves: runPlannerBench, planner: runPlannerBench, state: runStateBench, mtls: runMtlsBench, issuance: runIssuanceBench, ha: runHaBench, enroll: runEnrollBench, rest: (log: (line: string) => void) => runRestBench(log, restMinutes) } as const

const log = (line: string): void => {
  process.stdout.write(`${line}\n`)
}

const only = values.only
if (only !== undefined && !(only in SECTIONS)) {
  process.stderr.write(`bench: --only must be one of ${Object.keys(SECTIONS).join(', ')}, got "${only}"\n`)
  process.exit(2)
}
for (const [name, run] of Object.entries(SECTIONS)) {
  // the alias runs once; rest takes minutes per run, so it runs only when named
  if (only === name || (only === undefined && name !== 'planner' && name !== 'rest')) await run(log)
}
