/**
 * A load-generator process of the fleet benchmark: thousands of light nodes (light-node.ts), each with its
 * own certificate and source address, answering the orchestrator's status questions over IPC.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { createSecureContext } from 'node:tls'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { tuneGarbageCollection } from '../../../src/gc-tuning.js'
import { mapChunked } from '../chunked.js'
import { LightNode, lateWithinOwnLag, type MarkOutcome } from './light-node.js'
import { LAG_BUCKET_MS, answerBucket, tally, type FromLoad, type LoadStatus, type ToLoad } from './load-protocol.js'

// Thousands of TLS connections here too, opened in bursts: the controller's V8 setting (src/gc-tuning.ts)
// applies to the load generator as much (the same connections, the client's side of them). It stands in
// for machines with CPUs of their own; what it spends comes off the cores the controller runs on.
tuneGarbageCollection()

let nodes: LightNode[] = []
/**
 * This process's event-loop delay since the mark: a load generator short of CPU reads answers and sends
 * retries late, which the figures would blame on the controller. 20 ms resolution: a timer, no sampling cost to speak of.
 */
const loopDelay = monitorEventLoopDelay({ resolution: 20 })
const counters: Record<string, number> = {}
const samples: Record<string, string> = {}
const count = (name: string, sample?: string, by = 1) => {
  counters[name] = (counters[name] ?? 0) + by
  if (sample !== undefined && samples[name] === undefined) {
    samples[name] = sample.slice(0, 200)
    process.stderr.write(`load generator: first ${name}: ${samples[name]}\n`)
  }
}

function send(message: FromLoad): void {
  process.send?.(message)
}

async function init(message: Extract<ToLoad, { type: 'init' }>): Promise<void> {
  const shared = { ports: message.ports, count }
  nodes = await mapChunked(message.nodes, 200, async (spec) => {
    const [cert, key] = await Promise.all([readFile(join(spec.bundleDir, 'cert.pem'), 'utf8'), readFile(join(spec.bundleDir, 'key.pem'), 'utf8')])
    const context = createSecureContext({ ca: message.ca, cert, key, minVersion: 'TLSv1.2' })
    return new LightNode(spec.name, spec.capacity, context, spec.localAddress, shared)
  })
}

const maxOf = (values: Iterable<number | null>): number | null => {
  let max: number | null = null
  for (const v of values) if (v !== null && (max === null || v > max)) max = v
  return max
}

/** Durations (ms; null: none) as counts by whole second. */
function bySecond(durations: readonly (number | null)[]): Record<string, number> {
  return tally(durations.filter((ms) => ms !== null).map((ms) => ({ [String(Math.floor(Math.max(0, ms) / 1000))]: 1 })))
}

/** The answered attempts after the mark, by group (late, on time) and quarter-second bucket of lead and duration. */
function answeredTally(marked: readonly MarkOutcome[]): LoadStatus['markAnswered'] {
  const of = (late: boolean) => {
    const group = marked.filter((o) => o.late === late)
    const by = (ms: (o: MarkOutcome) => number, bucketMs?: number) => tally(group.map((o) => ({ [answerBucket(ms(o), bucketMs)]: 1 })))
    return { leadMs: by((o) => o.answeredLeadMs), tookMs: by((o) => o.answeredTookMs), tcpMs: by((o) => o.answeredTcpMs), tlsMs: by((o) => o.answeredTlsMs), replyMs: by((o) => o.answeredReplyMs), lagMs: by((o) => o.answeredTimerLagMs, LAG_BUCKET_MS) }
  }
  return { late: of(true), onTime: of(false) }
}

function status(): LoadStatus {
  const gens = nodes.map((n) => n.generation).filter((g): g is number => g !== null)
  const maxGeneration = gens.length === 0 ? null : Math.max(...gens)
  const atMax = nodes.filter((n) => n.generation !== null && n.generation === maxGeneration)
  const marked = nodes.map((n) => n.markOutcome).filter((o) => o !== null)
  const cpu = process.cpuUsage()
  const moves = nodes.map((n) => n.moves())
  return {
    nodes: nodes.length,
    answered: nodes.filter((n) => n.firstAnswerAt !== null).length,
    lastFirstAnswerAt: maxOf(nodes.map((n) => n.firstAnswerAt)),
    minGeneration: gens.length === 0 ? null : Math.min(...gens),
    maxGeneration,
    lastReachedMaxAt: maxOf(atMax.map((n) => n.generationSince)),
    atMaxGeneration: atMax.length,
    markRenewed: marked.length,
    markSame: marked.filter((o) => o.same).length,
    markLostShards: marked.reduce((sum, o) => sum + o.lostShards, 0),
    markLate: marked.filter((o) => o.late).length,
    markLateByFailSafe: tally(marked.filter((o) => o.late).map((o) => ({ [String(Math.floor(o.failSafeAfterMarkMs / 1000))]: 1 }))),
    markLateAttempts: tally(marked.filter((o) => o.late).map((o) => o.attempts)),
    markLateWithinLag: marked.filter(lateWithinOwnLag).length,
    markRenewalAgeBySecond: bySecond(nodes.map((n) => n.renewalAgeAtMarkMs)),
    markLateRenewalAgeBySecond: bySecond(marked.filter((o) => o.late).map((o) => o.renewalAgeAtMarkMs)),
    markAnswered: answeredTally(marked),
    markLoopDelayMs: loopDelay.count === 0 ? null : { p50: loopDelay.percentile(50) / 1e6, p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 },
    markLastAt: maxOf(marked.map((o) => o.at)),
    shardsHeld: nodes.reduce((sum, n) => sum + n.rangeCount, 0),
    movesMissing: moves.reduce((sum, m) => sum + m.missing, 0),
    movesDeposits: moves.reduce((sum, m) => sum + m.deposits, 0),
    lastClaimAt: maxOf(nodes.map((n) => n.lastClaimAt)),
    counters: { ...counters },
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
  }
}

process.on('message', (message: ToLoad) => {
  switch (message.type) {
    case 'init':
      void init(message).then(() => send({ type: 'ready' }))
      return
    case 'start':
      for (const n of nodes) n.start(Math.random() * message.spreadMs)
      return send({ type: 'started' })
    case 'status':
      return send({ type: 'status', status: status() })
    case 'mark':
      for (const n of nodes) n.setMark()
      loopDelay.reset()
      loopDelay.enable()
      return send({ type: 'marked' })
    case 'track':
      for (const n of nodes) n.track(message.on)
      return send({ type: 'tracked' })
    case 'stop':
      for (const n of nodes) n.stop()
      send({ type: 'stopped' })
      process.disconnect()
      return
  }
})
process.on('disconnect', () => process.exit(0))
