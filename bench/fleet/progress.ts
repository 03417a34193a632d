/** The progress line a run prints on stderr once a second. */
import type { ChurnRunner } from './churn-runner.js'
import type { FleetLedger } from './ledger.js'

/** What the line reads. */
export interface ProgressSource {
  readonly ledger: FleetLedger
  readonly churn: ChurnRunner
  readonly startedAt: number
  /** total_shards now (a reshard changes it). */
  readonly shards: number
  readonly events: number
  phase(): string
  controllerUp(): boolean
}

/** One line: time, phase, churn done, highest generation seen, running shards, grants, starts, frozen nodes. */
export function progressLine(src: ProgressSource, now: number): string {
  const { ledger, churn } = src
  let generation = 0
  for (const plan of ledger.plans.values()) generation = Math.max(generation, plan.generation)
  const { instances, distinct } = ledger.runningTotals()
  const done = [...churn.done.values()].reduce((a, b) => a + b, 0)
  const twice = instances - distinct
  return [
    `fleet ${((now - src.startedAt) / 1000).toFixed(0).padStart(4)}s`,
    src.phase(),
    `churn ${done}/${src.events}`,
    `gen ${generation}`,
    `live ${churn.expectedLive().length}`,
    `running ${distinct}/${src.shards}${twice > 0 ? ` (${twice} ON TWO NODES)` : ''}`,
    `grants ${ledger.grants.length}`,
    `starts ${ledger.counter('starts')}`,
    churn.frozen.size > 0 ? `frozen ${churn.frozen.size}` : '',
    churn.cut.size > 0 ? `cut off ${churn.cut.size}` : '',
    src.controllerUp() ? 'controller up' : 'CONTROLLER DOWN',
  ]
    .filter(Boolean)
    .join(' | ')
}
