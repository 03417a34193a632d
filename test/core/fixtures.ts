/** Shared test fixtures for the core: settings, check-in bodies, certificates, a seeded PRNG. */
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import type { CheckinBody, IdentifyBody } from '../../src/core/schemas.js'
import type { CertRef, CheckinOutcome, ControllerSettings, IdentifyOutcome } from '../../src/core/types.js'

/** Settings like the SPEC's example config. */
export const SETTINGS: ControllerSettings = {
  totalShards: 64,
  maxConcurrency: 16,
  leaseSeconds: 30,
  identifyIntervalMs: 5100,
  dailyIdentifyLimit: null,
}

export const LEASE_MS = 30_000
export const T0 = 1_700_000_000_000

/** A valid check-in body for `nodeId`. */
export function body(nodeId: string, capacity: number, extra: Partial<CheckinBody> = {}): CheckinBody {
  return { node_id: nodeId, capacity, ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0, ...extra }
}

/** A certificate reference; one serial per node by default. */
export function cert(serial: string, notBefore = T0 - 86_400_000): CertRef {
  return { serial, notBefore }
}

/** A check-in without batching: register, re-plan, answer (what ControllerService does for a batch of one). */
export function checkIn(controller: Controller, now: number, checkin: CheckinBody, certificate: CertRef): CheckinOutcome {
  const registration = controller.register(now, checkin, certificate)
  controller.settle()
  return controller.checkinOutcome(checkin.node_id, registration, now)
}

/**
 * An Identify claim whose answer leaves at the moment it is decided: a grant's bucket is released at
 * `now`, as the service does once the answer is durable (IdentifyLimiter counts the interval from there).
 */
export function claimAnswered(controller: Controller, now: number, claim: IdentifyBody): IdentifyOutcome {
  const outcome = claimAs(controller, now, claim)
  if (outcome.granted && outcome.mode === 'identify') controller.identifyReleased(now, outcome.bucket)
  return outcome
}

/** An Identify claim presented with the certificate the node's record holds (as an honest node does). */
export function claimAs(controller: Controller, now: number, claim: IdentifyBody): IdentifyOutcome {
  return controller.claimIdentify(now, claim, controller.certSerialOf(claim.node_id) ?? 'f00d')
}

/** The plan part of a check-in answer for a node (after settle()), as if it checked in with nothing to report. */
export function checkinView(controller: Controller, nodeId: string, now = T0): CheckinOutcome {
  return controller.checkinOutcome(nodeId, { rotated: false, previousSerial: null }, now)
}

/** A controller with these nodes checked in at `now`, in order, each with its own serial. */
export function controllerWith(
  nodes: readonly [string, number][],
  settings: Partial<ControllerSettings> = {},
  now = T0,
): Controller {
  const controller = new Controller({ ...SETTINGS, ...settings })
  nodes.forEach(([nodeId, capacity], i) => checkIn(controller, now, body(nodeId, capacity), cert(`a${i}`)))
  return controller
}

/** mulberry32: a small seeded PRNG, so the property tests are reproducible. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let x = state
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

// This module sits under test/, so tap runs it as a file of its own too.
t.pass('fixtures load')
