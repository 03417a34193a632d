/**
 * What one connection costs at the ceiling (raw node:https + node:crypto with the controller's TLS
 * settings, bench/mtls-target.ts), measured in the same run as the fleet's phases: this machine's speed
 * changes by a factor of two from one hour to the next, so a phase's CPU means something only next to
 * what the least possible work would have cost at that hour. Uses the fleet's own PKI (P-256), with the
 * mTLS bench's own node names (the ceiling answers only those), issued once into `<pki>/bundles-ec`.
 */
import { chmod, copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { measureCeilingCosts, type CeilingCosts } from '../../mtls-handshake.js'
import { checkinRequest, type Identity } from '../../mtls-client.js'
import { startTarget, stopTarget } from '../../mtls-process.js'
import { makeNodes } from '../../mtls-bench.js'
import type { FleetPki } from '../fleet-pki.js'
import type { BenchFigures } from './fleet-bench.js'

export type { CeilingCosts } from '../../mtls-handshake.js'

/** Starts the ceiling on a copy of the fleet's server files, measures it, stops it, removes the copy. */
export async function ceilingCosts(pki: FleetPki): Promise<CeilingCosts> {
  const root = await mkdtemp(join(tmpdir(), 'pxe-fleet-ceiling-'))
  try {
    const dir = join(root, 'pki')
    await mkdir(dir, { mode: 0o700 })
    for (const name of ['ca.pem', 'crl.pem', 'plan-keys.json']) await copyFile(join(pki.dir, name), join(dir, name))
    await copyFile(join(pki.dir, 'server.pem'), join(dir, 'server-ec.pem'))
    await copyFile(join(pki.dir, 'server-key.pem'), join(dir, 'server-ec-key.pem'))
    await chmod(join(dir, 'server-ec-key.pem'), 0o600)
    const ids: Identity[] = await makeNodes(pki.dir, 'ec')
    const ceiling = await startTarget('ceiling', 'ec', root)
    try {
      return await measureCeilingCosts(ceiling, ids, ids.map((id) => checkinRequest(id.name, undefined)), Buffer.from(pki.ca))
    } finally {
      await stopTarget(ceiling)
    }
  } finally {
    await rm(root, { recursive: true, force: true }) // a copy of the server's private key
  }
}

/** The CPU (s) `full` full and `resumed` resumed connections cost at the ceiling (`renewalMs` prices check-ins on open connections: joinBreakdown). */
export function atCeiling(costs: CeilingCosts, full: number, resumed: number): number {
  return (full * costs.fullMs + resumed * costs.resumedMs) / 1000
}

/**
 * The cold join's CPU, taken apart. Besides the joins (a full handshake and a first check-in each, what
 * the ceiling's full connection measures), the phase answers the renewals of the nodes that joined
 * earlier (a check-in every lease/3 on their open connection) and, before the plan is stable, one more
 * from every node to take the last generation: work a fleet does in its steady state too. Priced at the
 * steady state's CPU per check-in measured in the same run, that part is set apart, so what is left is
 * what the joins themselves cost (the deferrals and the per-join bookkeeping included).
 */
export interface JoinBreakdown {
  /** Check-ins answered on a connection already open (check-ins less handshakes). */
  readonly renewals: number
  /** The steady state's controller CPU per check-in (ms), background work included. */
  readonly steadyMsPerCheckin: number
  /** renewals × steadyMsPerCheckin (s). */
  readonly renewalsS: number
  /** The phase's CPU less the re-plans and the renewals (s). */
  readonly joinsS: number
  /** joinsS against the ceiling's cost of the phase's connections (null without a ceiling). */
  readonly ratio: number | null
  /**
   * The whole phase at the ceiling's costs (s): its connections as full ones and its renewals as check-ins
   * arriving alone at a fleet's pace (null without a ceiling). The least this phase could cost here.
   */
  readonly atCeilingS: number | null
  /** atCeilingS against the ceiling's cost of the connections alone: what the ceiling itself would read on the measure. */
  readonly ceilingOwnRatio: number | null
  /** The phase less its re-plans against atCeilingS. */
  readonly vsCeilingPhase: number | null
}

export function joinBreakdown(input: {
  readonly controllerCpuS: number
  readonly replanS: number | null
  readonly checkins: number
  readonly handshakes: number
  readonly steadyCpuPerS: number
  readonly steadyCheckinsPerS: number
  readonly ceiling: CeilingCosts | null
}): JoinBreakdown | null {
  if (input.steadyCheckinsPerS <= 0 || input.handshakes <= 0) return null
  const renewals = Math.max(0, input.checkins - input.handshakes)
  const steadyMsPerCheckin = (input.steadyCpuPerS * 1000) / input.steadyCheckinsPerS
  const renewalsS = (renewals * steadyMsPerCheckin) / 1000
  const joinsS = input.controllerCpuS - (input.replanS ?? 0) - renewalsS
  const at = input.ceiling === null ? null : atCeiling(input.ceiling, input.handshakes, 0)
  const atCeilingS = input.ceiling === null || at === null ? null : at + (renewals * input.ceiling.renewalMs) / 1000
  const apart = input.controllerCpuS - (input.replanS ?? 0)
  return {
    renewals,
    steadyMsPerCheckin,
    renewalsS,
    joinsS,
    ratio: at === null ? null : joinsS / Math.max(at, 1e-9),
    atCeilingS,
    ceilingOwnRatio: at === null || atCeilingS === null ? null : atCeilingS / Math.max(at, 1e-9),
    vsCeilingPhase: atCeilingS === null ? null : apart / Math.max(atCeilingS, 1e-9),
  }
}

/** joinBreakdown of one run's cold join, priced at that run's first steady window. */
export function coldJoinBreakdown(f: BenchFigures): JoinBreakdown | null {
  const c = f.coldJoin
  return joinBreakdown({
    controllerCpuS: c.controllerCpuS,
    replanS: c.replanS,
    checkins: c.counters.checkins ?? 0,
    handshakes: c.counters.handshakes ?? 0,
    steadyCpuPerS: f.steady.controllerCpuPerS,
    steadyCheckinsPerS: f.steady.checkinsPerS,
    ceiling: f.ceiling,
  })
}
