/**
 * Plays the scenario's timeline (schedule.ts) on one side, product or control: starts the four bots,
 * makes one leave half-way and a new one join three quarters in, samples each node's share and demand
 * once a second (the product side has them; the control has none), and prints a progress line. What it
 * returns is the raw material of the figures (figures.ts); the emulator keeps the rest.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks'
import type { GatewayEmulator } from '../../test/support/gateway/gateway-emulator.js'
import type { BotCounts, LoadBot } from './load-bot.js'
import { SCENARIO_BOTS, type BotPlan, type Schedule } from './schedule.js'

/** A node's REST share and reported demand at one moment (product side only). */
export interface NodeSample {
  /** Ms since the start of the run. */
  readonly atMs: number
  readonly node: string
  /** The share in force at the proxy (requests/s), 0 when none. */
  readonly share: number
  /** The demand the node reported in its last check-in (requests/s). */
  readonly demand: number
}

/** What a side does when the timeline says so. */
export interface ScenarioSide {
  readonly label: 'product' | 'control'
  /** Starts a node with its bot (product: its agent and proxy first); the bot is not started yet. */
  addNode(plan: BotPlan, index: number): Promise<LoadBot>
  /** The node leaves (product: agent.leave()); its bot has stopped already. */
  removeNode(name: string): Promise<void>
  /** Each node's share and demand now (empty on the control side). */
  sample(): { node: string; share: number; demand: number }[]
  /** Stops whatever still runs. */
  close(): Promise<void>
}

/** One bot's record of a run. */
export interface BotRecord {
  readonly name: string
  readonly perSecond: number
  /** When it started and stopped, ms since the start of the run. */
  readonly fromMs: number
  readonly toMs: number
  readonly counts: BotCounts
}

/** The raw record of a run. */
export interface ScenarioRecord {
  readonly label: 'product' | 'control'
  readonly schedule: Schedule
  /** The emulator's REST clock (ms) at the start of the run: its records' `at` minus this is run time. */
  readonly emulatorZeroMs: number
  /** performance.now() at the start of the run: the bots' `okAt` minus this is run time. */
  readonly perfZeroMs: number
  readonly bots: readonly BotRecord[]
  readonly samples: readonly NodeSample[]
  /** The longest the event loop (which runs every part of the run) was held up, ms: what arrivals at the emulator may be bunched by. */
  readonly maxLoopDelayMs: number
  /**
   * Resolves once every bot's REST client has let go of the requests it gave up (it takes seconds: the
   * client's global waits cannot be aborted; none of them reaches the network). Await before exiting.
   */
  readonly settled: Promise<void>
}

const sleepUntil = (t0: number, atMs: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, t0 + atMs - performance.now())))

/** Runs the timeline on `side` against emulator `e`; `progress` gets a line every `progressMs`. */
export async function runScenario(side: ScenarioSide, e: GatewayEmulator, schedule: Schedule, progress: (line: string) => void, progressMs = 10_000): Promise<ScenarioRecord> {
  const bots = new Map<string, { bot: LoadBot; fromMs: number; toMs: number | null }>()
  const samples: NodeSample[] = []
  const t0 = performance.now()
  const emulatorZeroMs = e.restNow()
  const now = () => performance.now() - t0
  let index = 0
  const start = async (plan: BotPlan) => {
    const bot = await side.addNode(plan, index++)
    bot.start()
    bots.set(plan.name, { bot, fromMs: now(), toMs: null })
  }
  const loop = monitorEventLoopDelay({ resolution: 10 })
  loop.enable()
  const sampler = setInterval(() => {
    const at = now()
    for (const s of side.sample()) samples.push({ atMs: at, ...s })
  }, 1000)
  let lastProgress = 0
  const reporter = setInterval(() => {
    const at = now()
    if (at - lastProgress < progressMs) return
    lastProgress = at
    progress(progressLine(side.label, at, schedule, [...bots.values()].filter((b) => b.toMs === null).map((b) => b.bot), e))
  }, 500)
  try {
    await Promise.all(SCENARIO_BOTS.start.map((plan) => start(plan)))
    await sleepUntil(t0, schedule.leaveAtMs)
    const leaving = bots.get(SCENARIO_BOTS.leaves)!
    // The bot stops wanting first (its machine is being shut down), then the node leaves.
    leaving.toMs = now()
    leaving.bot.stop()
    await side.removeNode(SCENARIO_BOTS.leaves)
    await sleepUntil(t0, schedule.joinAtMs)
    await start(SCENARIO_BOTS.joins)
    await sleepUntil(t0, schedule.totalMs)
    const end = now()
    const running = [...bots.values()].filter((b) => b.toMs === null)
    for (const b of running) b.toMs = end
    for (const b of running) b.bot.stop() // requests still held are given up: the figures end here
  } finally {
    clearInterval(sampler)
    clearInterval(reporter)
    loop.disable()
    for (const b of bots.values()) b.bot.stop()
    await side.close()
  }
  return {
    label: side.label,
    schedule,
    emulatorZeroMs,
    perfZeroMs: t0,
    bots: [...bots.entries()].map(([name, b]) => ({ name, perSecond: b.bot.perSecond, fromMs: b.fromMs, toMs: b.toMs ?? now(), counts: b.bot.counts })),
    samples,
    maxLoopDelayMs: loop.max / 1e6,
    settled: Promise.all([...bots.values()].map((b) => b.bot.settled())).then(() => undefined),
  }
}

function progressLine(label: string, atMs: number, schedule: Schedule, running: LoadBot[], e: GatewayEmulator): string {
  const stats = e.restStats
  const phase = atMs < schedule.leaveAtMs ? 'four nodes' : atMs < schedule.joinAtMs ? 'after the leave' : 'after the join'
  const lastSecond = stats.okPerSecond[Math.floor(e.restNow() / 1000) - 1] ?? 0
  return [
    `rest ${label} ${(atMs / 1000).toFixed(0).padStart(4)}/${(schedule.totalMs / 1000).toFixed(0)} s`,
    phase,
    `bots ${running.length}`,
    `emulator ${lastSecond}/s ok`,
    `global 429 ${stats.global429}`,
    `route 429 ${stats.route429}`,
    `bans ${stats.bans.length}`,
  ].join(' | ')
}
