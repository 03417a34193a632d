/**
 * What a renewal costs a target at a fleet's pace: a check-in on a connection already open, arriving on
 * its own. A fleet of 10,000 nodes checking in every lease/3 (10 s) sends 1,000 check-ins a second,
 * spread out, so nearly every one wakes the server alone and pays the whole way in (epoll, the TLS read,
 * the parser) and out by itself; the check-in section of the mTLS bench, closed loops back to back,
 * shares those among many requests per turn and measures a third of that. The fleet bench prices its
 * cold join's renewals with this, measured on the ceiling in the same run.
 */
import { Connection, withTimeout, type Identity } from './mtls-client.js'
import { measureWindow } from './mtls-checkin.js'
import type { Target } from './mtls-process.js'

/** A renewal not answered in this time means a stalled target: the measurement stops. */
const ANSWER_TIMEOUT_MS = 10_000

/** Check-ins per second across all connections: a 10,000-node fleet at lease/3 = 10 s. */
export const RENEWAL_PACE_PER_S = 1000

/** Server CPU (ms) per check-in over `rounds` windows of `ms`, each connection checking in at its share of the pace. */
export async function measureRenewalCost(target: Target, ca: Buffer, ids: readonly Identity[], requests: readonly Buffer[], opts: { readonly warmupMs: number; readonly rounds: number; readonly ms: number; readonly answerTimeoutMs?: number }): Promise<number> {
  const opened = await Promise.allSettled(ids.map((id) => Connection.open(target.port, ca, id)))
  const refused = opened.find((o): o is PromiseRejectedResult => o.status === 'rejected')
  if (refused !== undefined) {
    for (const o of opened) if (o.status === 'fulfilled') o.value.socket.destroy()
    throw refused.reason
  }
  const connections = opened.map((o) => (o as PromiseFulfilledResult<Connection>).value)
  const gapMs = (ids.length * 1000) / RENEWAL_PACE_PER_S
  let running = true
  let recording = false
  let checkins = 0
  let failure: Error | undefined
  const loop = async (i: number): Promise<void> => {
    // staggered starts, so that the connections' check-ins arrive spread out, as a fleet's do
    await new Promise((r) => setTimeout(r, (i * gapMs) / ids.length))
    while (running) {
      const next = performance.now() + gapMs
      const timeoutMs = opts.answerTimeoutMs ?? ANSWER_TIMEOUT_MS
      const reply = await withTimeout(connections[i]!.send(requests[i]!), timeoutMs, `${target.kind} (${target.key}): a renewal got no answer within ${timeoutMs} ms`)
      if (reply.status !== 200) throw new Error(`${target.kind} (${target.key}) answered a renewal with ${reply.status}: ${reply.body.toString('utf8').slice(0, 200)}`)
      if (recording) checkins++
      const wait = next - performance.now()
      if (wait > 0) await new Promise((r) => setTimeout(r, wait))
    }
  }
  const settled = Promise.all(ids.map((_, i) => loop(i))).catch((err: Error) => {
    failure ??= err
    running = false
  })
  try {
    await new Promise((r) => setTimeout(r, opts.warmupMs))
    let cpuMicros = 0
    let counted = 0
    for (let round = 0; round < opts.rounds && failure === undefined; round++) {
      const window = await measureWindow(target, opts.ms, (on) => {
        if (on) checkins = 0
        recording = on
      })
      cpuMicros += window.serverCpuMicros
      counted += checkins
    }
    running = false
    await settled
    if (failure) throw failure
    if (counted === 0) throw new Error(`${target.kind} (${target.key}): no renewal answered in the measured windows`)
    return cpuMicros / 1000 / counted
  } finally {
    running = false
    for (const c of connections) c.socket.destroy()
  }
}
