/**
 * The two runs of the REST-budget scenario, each on a fresh gateway emulator with Discord's REST rules
 * (test/support/gateway): the control (four independent @discordjs/rest clients, no controller) and the
 * product (four node agents with their REST proxies and a real controller, which the caller starts: a
 * child process in the bench, in-process in the test).
 */
import { startGatewayEmulator } from '../../test/support/gateway/gateway-emulator.js'
import { controlSide } from './control-side.js'
import { runFigures, type RunFigures } from './figures.js'
import { productSide, type ProductSideOptions, type ShareChange } from './product-side.js'
import { runScenario, type ScenarioRecord } from './scenario-run.js'
import type { Schedule } from './schedule.js'

/** A run's figures and its raw record. */
export interface RunResult {
  readonly figures: RunFigures
  readonly record: ScenarioRecord
  readonly shareChanges: readonly ShareChange[] | null
}

type Progress = (line: string) => void

/** The control run (`inFlightSeconds`: the bots' in-flight bound in seconds of demand). */
export async function runControl(schedule: Schedule, progress: Progress, progressMs?: number, inFlightSeconds?: number): Promise<RunResult> {
  const e = await startGatewayEmulator({ shardCount: 1 })
  try {
    const record = await runScenario(controlSide(e, inFlightSeconds), e, schedule, progress, progressMs)
    return { figures: runFigures(record, e.restStats, e.restRequests, null), record, shareChanges: null }
  } finally {
    await e.stop()
  }
}

/** The product run against the controller at `controllers` (the nodes' identities by bot name). */
export async function runProduct(schedule: Schedule, controller: Omit<ProductSideOptions, 'emulator'>, progress: Progress, progressMs?: number): Promise<RunResult> {
  const e = await startGatewayEmulator({ shardCount: 1 })
  try {
    const side = productSide({ ...controller, emulator: e })
    const record = await runScenario(side, e, schedule, progress, progressMs)
    return { figures: runFigures(record, e.restStats, e.restRequests, side.shareChanges), record, shareChanges: side.shareChanges }
  } finally {
    await e.stop()
  }
}
