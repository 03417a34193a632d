/** `npm run bench [-- --only core|moves|planner|state|mtls|issuance|ha|enroll]` (planner: an alias of moves): prints every benchmark section (or the one named). */
import { parseArgs } from 'node:util'
import { runCoreBench } from './core-bench.js'
import { runEnrollBench } from './enroll-bench.js'
import { runHaBench } from './ha-bench.js'
import { runIssuanceBench } from './issuance-bench.js'
import { runMtlsBench } from './mtls-bench.js'
import { runPlannerBench } from './planner-bench.js'
import { runStateBench } from './state-bench.js'

const SECTIONS = { core: runCoreBench, moves: runPlannerBench, planner: runPlannerBench, state: runStateBench, mtls: runMtlsBench, issuance: runIssuanceBench, ha: runHaBench, enroll: runEnrollBench } as const

const log = (line: string): void => {
  process.stdout.write(`${line}\n`)
}

const { values } = parseArgs({ options: { only: { type: 'string' } }, strict: true, allowPositionals: false })
const only = values.only
if (only !== undefined && !(only in SECTIONS)) {
  process.stderr.write(`bench: --only must be one of ${Object.keys(SECTIONS).join(', ')}, got "${only}"\n`)
  process.exit(2)
}
for (const [name, run] of Object.entries(SECTIONS)) {
  if (only === name || (only === undefined && name !== 'planner')) await run(log) // the alias runs once
}
