/**
 * The app as buildApp makes it, driven with `app.inject` (fastify's demo style): the real routes, policy
 * table, error handler and ControllerService over the real journaled file store in a temp folder. Only
 * the identity seam is replaced: a request's principal is looked up by its `remoteAddress`. Real TLS
 * (test/e2e) stays the proof for how a certificate becomes a principal.
 */
import type { Test } from 'tap'
import { createPrivateKey } from 'node:crypto'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { buildApp } from '../../src/app.js'
import type { Principal, Role } from '../../src/identity/principal.js'
import { PrincipalRateLimiter } from '../../src/http/principal-rate-limiter.js'
import { startService } from '../../src/service/service-host.js'
import { JournaledFileStore } from '../../src/state/journaled-file-store.js'
import { parsePlanKeys } from '../../src/signing/plan-keys.js'
import { PlanSigner } from '../../src/signing/plan-signer.js'
import { newPlanKey } from '../../pki/plan-keys.js'
import type { ControllerSettings } from '../../src/core/types.js'
import { testDir } from '../support/test-dir.js'
import { SingleEnrollHost } from '../../src/service/enroll-host.js'
import { EnrollFileStore } from '../../src/state/enroll-file-store.js'
import { ProofSeal } from '../../src/service/proof-seal.js'

/** An app with callers by address: `as(address)` injects from that principal. */
export interface InjectedApp {
  readonly app: FastifyInstance
  /** Every audit line the app wrote (limited ones included). */
  readonly audit: { event: string; fields: Record<string, unknown> }[]
  /** Serials that count as revoked from now on. */
  readonly revoked: Set<string>
  readonly jwks: unknown
  /** Makes a principal reachable from `address`. */
  principal(address: string, name: string, role: Role, extra?: Partial<Principal>): Principal
  /** Injects a request from `address` (one with no principal fails identity). */
  from(address: string, opts: InjectOptions): Promise<LightMyRequestResponse>
}

const T0 = Date.UTC(2026, 11, 1)

/** Builds the app with a fresh state; closed (and its store) at the test's end. */
export async function injectedApp(t: Test, settings: Partial<ControllerSettings> = {}, limits = { perSecond: 100_000, burst: 100_000 }): Promise<InjectedApp> {
  const dir = testDir(t)
  const audit: InjectedApp['audit'] = []
  const record = (event: string, fields: Record<string, unknown>) => void audit.push({ event, fields })
  const revoked = new Set<string>()
  const principals = new Map<string, Principal>()
  let clock = T0
  const now = () => (clock += 1) // moves a ms per read: leases and intervals stay realistic
  const store = new JournaledFileStore(dir)
  const service = startService(
    {
      settings: { totalShards: 64, maxConcurrency: 16, leaseSeconds: 30, identifyIntervalMs: 5100, dailyIdentifyLimit: null, ...settings },
      now,
      audit: { record },
      isRevoked: (serial) => revoked.has(serial),
      crlInForce: () => {
        throw new Error('not used by the file store')
      },
    },
    store,
    null,
  )
  const key = await newPlanKey()
  const signer = new PlanSigner(await parsePlanKeys({ current: key.kid, keys: [key] }, 'test plan keys'))
  const app = await buildApp({
    identify: (socket) => principals.get(socket.remoteAddress ?? '') ?? { reason: 'no client certificate' },
    isRevoked: (serial) => revoked.has(serial),
    wallClock: () => T0,
    audit: { record },
    peerAudit: { record: (event, source, fields) => (record(event, { source, ...fields }), true) },
    rateLimiter: new PrincipalRateLimiter({ node: limits, operator: limits, signer: limits }, now),
    service,
    // the enrollment queue over the real state directory's store (enrollment is tested over real TLS: test/e2e/enroll.test.ts)
    // (no CA here: the inject tests post no certificate, so caPem is never read)
    enroll: await SingleEnrollHost.open({ now, audit: { record }, sealer: ProofSeal.derive(createPrivateKey({ key: { ...key }, format: 'jwk' }), 'inject'), caPem: '', planJwks: () => signer.jwks }, new EnrollFileStore(dir)),
    certOnRecord: (nodeId) => service.certSerialOf(nodeId),
    signer,
    controllerId: 'inject-controller',
    // POST /v1/crl is tested over real mTLS (test/e2e/crl-push.test.ts)
    crlPush: { push: () => Promise.reject(new Error('not used by the inject tests')) },
  })
  t.teardown(async () => {
    await app.close()
    await service.flushFinal()
    await store.close()
  })
  let serial = 0x1000
  return {
    app,
    audit,
    revoked,
    jwks: signer.jwks,
    principal(address, name, role, extra = {}) {
      const p: Principal = { name, role, serial: (serial++).toString(16), notBefore: T0 - 86_400_000, notAfter: T0 + 86_400_000, ...extra }
      principals.set(address, p)
      return p
    },
    from: (address, opts) => app.inject({ ...opts, remoteAddress: address }),
  }
}
