/** The SPEC's endpoints: decode → validate → call the service → render. Described for the API reference in endpoints.ts. */
import type { FastifyInstance } from 'fastify'
import { AppError } from '../errors.js'
import { DepositRefused } from '../core/session-deposit.js'
import { checkinBodySchema, drainBodySchema, identifyBodySchema, reshardBodySchema } from '../core/schemas.js'
import type { ServiceApi } from '../service/controller-service.js'
import type { AuditSink } from '../audit/audit-sink.js'
import type { PlanSigner } from '../signing/plan-signer.js'
import type { PeerAuditLimiter, PrincipalEvent } from '../audit/peer-audit-limiter.js'
import type { Principal } from '../identity/principal.js'
import { parseOr400 } from './parse.js'
import { checkinAnswer } from './checkin-answer.js'
import { assertCheckinBodySize, SESSIONS_BODY_LIMIT_BYTES } from './json-body.js'
import { renderIdentify, renderPlan } from './render.js'
import { assertCrlMediaType, CRL_BODY_LIMIT_BYTES, crlBodyText, installCrlBodyParser } from './crl-body.js'
import { guildParamsSchema, nodeParamsSchema } from './endpoints.js'
import type { CrlPush } from '../service/crl-push.js'
import type { EnrollHost } from '../service/enroll-host.js'
import { decisionBodySchema, ENROLL_BODY_LIMIT_BYTES, EnrollRefused, renewBodySchema, requestParamsSchema, signerListQuerySchema } from '../service/enroll-service.js'

/** Pending requests the signer gets per pull. */
const SIGNER_PAGE = 500

export interface RouteDeps {
  readonly service: ServiceApi
  readonly signer: PlanSigner
  readonly controllerId: string
  readonly wallClock: () => number
  readonly audit: AuditSink
  /** Audits refusals a valid certificate can repeat at will, limited per certificate serial. */
  readonly peerAudit: Pick<PeerAuditLimiter, 'record'>
  /** Installs an operator's CRL (POST /v1/crl). */
  readonly crlPush: Pick<CrlPush, 'push'>
  /** The enrollment queue (renewals, the signer's endpoints, the operator's view). */
  readonly enroll: EnrollHost
  /** The serial of the certificate a live node's record holds, or null (only that one may renew). */
  readonly certOnRecord: (nodeId: string) => string | null
}

type LimitedAudit = RouteDeps['peerAudit']

/** A node may only act as itself: the body's node_id must equal the certificate CN. */
function assertSelf(bodyNodeId: string, me: Principal, audit: LimitedAudit, endpoint: string): void {
  if (bodyNodeId === me.name) return
  audit.record('identity_mismatch', me.serial, { endpoint, cert_name: me.name, body_node_id: bodyNodeId })
  throw new AppError('identity_mismatch', 'node_id does not match the client certificate')
}

/** Runs `op`; a refusal of kind `event` is audited (limited per principal) and rethrown. */
function auditRefusal<T>(event: PrincipalEvent, me: Principal, audit: LimitedAudit, fields: Record<string, unknown>, op: () => T): T {
  try {
    return op()
  } catch (err) {
    if (err instanceof AppError && err.code === event) audit.record(event, me.serial, { ...fields, detail: err.message })
    throw err
  }
}

/** Runs `op`; a check-in refused for its sessions is audited with the rule it broke (never the values) and rethrown. */
function auditDepositRefusal<T>(me: Principal, audit: LimitedAudit, nodeId: string, op: () => T): T {
  try {
    return op()
  } catch (err) {
    if (err instanceof DepositRefused) audit.record('session_deposit_refused', me.serial, { node_id: nodeId, shard_id: err.shardId, rule: err.rule })
    throw err
  }
}

/** Registers every endpoint on the app. */
export function registerRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { service, signer, peerAudit } = deps

  app.post('/v1/checkin', { bodyLimit: SESSIONS_BODY_LIMIT_BYTES }, async (request, reply) => {
    assertCheckinBodySize(request.body, request.bodyBytes)
    const body = parseOr400(checkinBodySchema, request.body, 'check-in body')
    const me = request.principal
    assertSelf(body.node_id, me, peerAudit, 'checkin')
    const cert = { serial: me.serial, notBefore: me.notBefore, notAfter: me.notAfter }
    const out = await auditRefusal('identity_conflict', me, peerAudit, { node_id: body.node_id }, () => auditDepositRefusal(me, peerAudit, body.node_id, () => service.checkIn(body, cert)))
    const body_ = checkinAnswer(out, body.node_id, deps.controllerId, deps.wallClock(), signer)
    return reply.type('application/json; charset=utf-8').send(body_)
  })

  app.post('/v1/identify', async (request) => {
    const body = parseOr400(identifyBodySchema, request.body, 'identify body')
    const me = request.principal
    assertSelf(body.node_id, me, peerAudit, 'identify')
    const fields = { node_id: body.node_id, shard_id: body.shard_id }
    // Served only to the certificate the node's record holds: another one of the same name is audited as a conflict.
    const claim = () => auditRefusal('not_owner', me, peerAudit, fields, () => service.claimIdentify(body, me.serial))
    const out = await auditRefusal('identity_conflict', me, peerAudit, { ...fields, endpoint: 'identify' }, claim)
    request.outcome = out.granted ? (out.mode === 'resume' ? 'resumed' : 'granted') : out.reason
    return renderIdentify(out)
  })

  app.get('/v1/route/:guild_id', async (request) => {
    const { guild_id } = parseOr400(guildParamsSchema, request.params, 'guild id')
    const out = await service.route(guild_id)
    return { guild_id: out.guildId, shard_id: out.shardId, node_id: out.nodeId, generation: out.generation }
  })

  app.get('/v1/keys', async () => signer.jwks)

  app.get('/v1/plan', async () => {
    const view = await service.plan()
    // only the leader answers (an HA follower refuses with not_leader): this replica is the leader
    return { ...renderPlan(view), leader: deps.controllerId }
  })

  app.post('/v1/nodes/:node_id/drain', async (request) => {
    const { node_id } = parseOr400(nodeParamsSchema, request.params, 'node id')
    const { draining, force } = parseOr400(drainBodySchema, request.body, 'drain body')
    const out = await service.setDraining(node_id, draining, request.principal.name, force === true)
    return { node_id: out.nodeId, draining: out.draining, generation: out.generation, live: out.live, unassigned: out.unassigned }
  })

  app.post('/v1/reshard', async (request, reply) => {
    const { total_shards } = parseOr400(reshardBodySchema, request.body, 'reshard body')
    const out = await service.startReshard(total_shards, request.principal.name)
    return reply.code(202).send({ from: out.from, to: out.to, generation: out.generation })
  })

  app.delete('/v1/reshard', async (request) => {
    const out = await service.abortReshard(request.principal.name)
    return { from: out.from, to: out.to, generation: out.generation, aborted: true }
  })

  app.post('/v1/renew', { bodyLimit: ENROLL_BODY_LIMIT_BYTES }, async (request, reply) => {
    const me = request.principal
    const address = request.raw.socket.remoteAddress ?? 'unknown'
    try {
      const { csr } = parseOr400(renewBodySchema, request.body, 'renewal body')
      const out = await auditRefusal('identity_conflict', me, peerAudit, { node_id: me.name, endpoint: 'renew' }, () =>
        deps.enroll.serve((s) => s.renew(csr, me, address, deps.certOnRecord(me.name))),
      )
      return reply.code(202).send(out)
    } catch (err) {
      if (err instanceof EnrollRefused) peerAudit.record('enroll_refused', address, { rule: err.rule, detail: err.message, serial: me.serial, name: me.name })
      throw err
    }
  })

  app.get('/v1/renew/:request_id', async (request) => {
    const { request_id } = parseOr400(requestParamsSchema, request.params, 'request id')
    return deps.enroll.serve((s) => s.renewalStatus(request_id, request.principal))
  })

  app.get('/v1/enroll/requests', async (request) => {
    const { after, limit } = parseOr400(signerListQuerySchema, request.query, 'query')
    return { requests: await deps.enroll.serve((s) => s.pendingForSigner(limit ?? SIGNER_PAGE, after)) }
  })

  app.post('/v1/enroll/requests/:request_id', { bodyLimit: ENROLL_BODY_LIMIT_BYTES }, async (request) => {
    const { request_id } = parseOr400(requestParamsSchema, request.params, 'request id')
    const body = parseOr400(decisionBodySchema, request.body, 'answer body')
    return deps.enroll.serve((s) => s.decide(request_id, body, request.principal))
  })

  app.get('/v1/enroll/queue', async () => deps.enroll.serve((s) => s.queueView()))

  // The CRL media types are parsed in this route's own scope (every other route still answers them 415);
  // the media type is checked before the body is read; the body is PEM text, not JSON.
  void app.register(async (scope) => {
    installCrlBodyParser(scope)
    scope.post('/v1/crl', { bodyLimit: CRL_BODY_LIMIT_BYTES, preParsing: assertCrlMediaType }, async (request) => {
      return deps.crlPush.push(crlBodyText(request.body), request.principal.name)
    })
  })
}
