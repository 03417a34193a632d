// The controller's side of enrollment and renewal over real TLS (SPEC "Device enrollment and renewal"): the
// enrollment listener (no client certificate) queues what a node sends and bounds what strangers can put in the
// queue; only a signer may pull and answer, and only a certificate that fits its request is installed; a renewal is
// served to the certificate on record; the queue survives a restart without a proof in any file. Every refusal is
// checked for its error, its audit line, and that nothing changed. The CA host's side: test/e2e/signer.test.ts.
import t from 'tap'
import { generateKeyPairSync, X509Certificate } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { buildCsr, csrDer } from '../../src/der/csr.js'
import { enrollProof, parseToken } from '../../src/core/enroll-token.js'
import { createToken, revokeToken } from '../../pki/token-store.js'
import { signPass } from '../../pki/enroll-issue.js'
import { revoke } from '../../pki/revocation.js'
import type { PulledRequest } from '../../pki/enroll-judge.js'
import { bundle, checkinBody, makePki, opensslCert, request, startTestController, type Identity, type Reply, type TestController } from './harness.js'
import { testDir } from '../support/test-dir.js'
import { pino } from 'pino'

const root = testDir(t)
const pki = await makePki(root)
const enrollConfig = { enroll: { host: '127.0.0.1', port: 0, poll_after_ms: 500, per_address_pending: 3, per_token_pending: 4, per_address: { per_second: 1000, burst: 1000 } } }
// the operational log at trace level, scanned at the end for secrets
const logFile = join(root, 'controller.log')
const logger = () => pino({ level: 'trace' }, pino.destination({ dest: logFile, sync: true, append: true }))
let ctl: TestController = await startTestController(pki, join(root, 'c1'), enrollConfig, { logger: logger() })
t.teardown(() => ctl.running.stop())
const signer = await bundle(pki, 'ca-signer', 'signer')
const operator = await bundle(pki, 'alice', 'operator')
const auto = await createToken(pki.dir, { names: 'rack-*', uses: 50 })

/** A fresh P-256 key and its CSR for `name`. */
function csrFor(name: string): string {
  return buildCsr(name, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey)
}

/** The body a node sends: the CSR, the token id and the proof under the token's secret. */
function enrollment(token: string, csr: string): { token_id: string; csr: string; proof: string } {
  const { id, secret } = parseToken(token)
  return { token_id: id, csr, proof: enrollProof(secret, csrDer(csr)) }
}

/** A request to the enrollment listener: no client certificate. */
function toListener(path: string, opts: Parameters<typeof request>[4] = {}): Promise<Reply> {
  return request(ctl.running.enrollPort!, pki.ca, null, path, opts)
}

const mtls = (id: Identity | null, path: string, opts: Parameters<typeof request>[4] = {}) => request(ctl.port, pki.ca, id, path, opts)
const audit = () => readFileSync(join(ctl.root, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>)
const pending = async () => (await mtls(operator, '/v1/enroll/queue')).json.pending as number

/** What the signer pulls now. */
async function pull(): Promise<PulledRequest[]> {
  const reply = await mtls(signer, '/v1/enroll/requests')
  t.equal(reply.status, 200)
  return reply.json.requests as PulledRequest[]
}

/** One pass of the CA host's signer: pull, judge and sign on the PKI, post every answer. */
async function signerPass(): Promise<Reply[]> {
  const { outcomes } = await signPass(pki.dir, await pull())
  const replies: Reply[] = []
  for (const o of outcomes) {
    if ('held' in o) continue
    const body = 'issued' in o ? { certificate: o.issued.certificate } : { denied: o.denied }
    replies.push(await mtls(signer, `/v1/enroll/requests/${o.request_id}`, { body }))
  }
  return replies
}

t.test('a node with no certificate enrolls: queued, signed on the CA host, fetched, and its certificate works on the mTLS listener', async (t) => {
  const key = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey
  const csr = buildCsr('rack-a1', key)
  const queued = await toListener('/v1/enroll', { body: enrollment(auto.token, csr) })
  t.equal(queued.status, 202)
  t.match(queued.json, { request_id: /^[A-Za-z0-9_-]{22}$/, poll_after_ms: 500 })
  const again = await toListener('/v1/enroll', { body: enrollment(auto.token, csr) })
  t.equal(again.json.request_id, queued.json.request_id, 'the same CSR again is the same request')
  t.same((await toListener(`/v1/enroll/${queued.json.request_id}`)).json, { status: 'pending' })
  const [mine] = (await pull()).filter((r) => r.request_id === queued.json.request_id)
  t.match(mine, { kind: 'enroll', name: 'rack-a1', token_id: parseToken(auto.token).id, source: '127.0.0.1', presenting_serial: null })
  t.equal(mine!.proof, enrollment(auto.token, csr).proof, 'the signer gets the proof the node sent')
  const posted = await signerPass()
  t.same(posted.map((r) => r.status), [200])
  const issued = await toListener(`/v1/enroll/${queued.json.request_id}`)
  t.equal(issued.json.status, 'issued')
  t.equal(issued.json.ca, pki.ca, 'the CA certificate the node then trusts')
  t.match(issued.json.plan_jwks, { keys: Array })
  const cert = new X509Certificate(issued.json.certificate)
  t.ok(cert.checkPrivateKey(key), 'the certificate carries the key the node made')
  t.match(cert.subject, /CN=rack-a1/)
  const identity = { cert: issued.json.certificate as string, key: key.export({ type: 'pkcs8', format: 'pem' }) as string }
  t.equal((await mtls(identity, '/v1/checkin', { body: checkinBody('rack-a1') })).status, 200, 'the enrolled node checks in')
  const events = audit().map((l) => l.event)
  t.ok(events.includes('enroll_requested') && events.includes('enroll_issued'))
  t.match(audit().find((l) => l.event === 'enroll_issued'), { name: 'rack-a1', signer: 'ca-signer', rule: 'token' })
})

t.test('refusals at the door: each answered with its error, audited enroll_refused, and the queue unchanged', async (t) => {
  const before = await pending()
  const good = enrollment(auto.token, csrFor('rack-b1'))
  const forged = csrDer(csrFor('rack-b2'))
  forged[forged.length - 3] = forged[forged.length - 3]! ^ 0xff
  const forgedPem = `-----BEGIN CERTIFICATE REQUEST-----\n${forged.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE REQUEST-----\n`
  const weak = opensslCsrPem('weak', '/CN=rack-weak', ['-newkey', 'rsa:1024'])
  const cases: [string, unknown, number, string, RegExp][] = [
    ['non-PEM CSR', { ...good, csr: 'hello' }, 400, 'invalid_request', /must be one PEM certificate request/],
    ['a CSR whose self-signature is wrong', { ...good, csr: forgedPem }, 400, 'invalid_request', /signature does not verify|not a valid certificate signing request/],
    ['an RSA-1024 key', { ...good, csr: weak }, 400, 'invalid_request', /RSA key has 1024 bits/],
    ['a name that breaks the name rule', { ...good, csr: csrFor('-rack') }, 400, 'invalid_request', /not a valid name/],
    ['a token id that is not one', { ...good, token_id: 'NOT-AN-ID' }, 400, 'invalid_request', /token_id/],
    ['a proof of the wrong length', { ...good, proof: 'abc' }, 400, 'invalid_request', /proof/],
    ['an unknown key', { ...good, extra: 1 }, 400, 'invalid_request', /unrecognized|extra/i],
    ['no body', undefined, 400, 'invalid_request', /./],
  ]
  for (const [what, body, status, code, message] of cases) {
    const reply = body === undefined ? await toListener('/v1/enroll', { method: 'POST' }) : await toListener('/v1/enroll', { body })
    t.equal(reply.status, status, `${what}: ${status}`)
    t.equal(reply.json.error, code, what)
    t.match(reply.json.message, message, what)
  }
  const big = await toListener('/v1/enroll', { body: { ...good, csr: `${good.csr}${'A'.repeat(16 * 1024)}` } })
  t.equal(big.status, 413, '16 KiB + 1 bytes: 413')
  t.equal(big.json.error, 'payload_too_large')
  const form = await toListener('/v1/enroll', { rawBody: 'token_id=x', contentType: 'application/x-www-form-urlencoded' })
  t.equal(form.status, 415)
  for (const path of ['/v1/checkin', '/v1/plan', '/v1/enroll/requests', '/v1/renew']) {
    const reply = await toListener(path, { body: {} })
    t.equal(reply.status, 404, `${path} is not served on the enrollment listener`)
    t.equal(reply.json.error, 'not_found')
  }
  t.equal((await toListener('/v1/enroll/not-an-id')).status, 400)
  t.equal((await toListener('/v1/enroll/AAAAAAAAAAAAAAAAAAAAAA')).status, 404)
  t.equal(await pending(), before, 'nothing was queued')
  const refused = audit().filter((l) => l.event === 'enroll_refused')
  t.ok(refused.length >= 5, 'refusals are audited')
  t.match(refused[0], { peer: '127.0.0.1', rule: String })
  t.equal((await toListener('/v1/enroll', { body: good })).status, 202, 'a good request is still served')
})

t.test('what only the signer can check: a wrong proof, a proof for another CSR, an unknown or revoked token, a name outside the pattern are queued, then denied', async (t) => {
  const other = await createToken(pki.dir, { names: 'rack-*' })
  const csr = csrFor('rack-c1')
  const revoked = await createToken(pki.dir, { names: 'rack-*' })
  await revokeToken(pki.dir, revoked.entry.id)
  const expired = await createToken(pki.dir, { names: 'rack-*', ttlMs: 60_000, now: new Date(Date.now() - 120_000) })
  const usedUp = await createToken(pki.dir, { names: 'rack-*', uses: 1 })
  await signPass(pki.dir, [fake('rack-c9', csrFor('rack-c9'), usedUp.token)])
  const bodies = [
    { ...enrollment(auto.token, csr), proof: enrollment(other.token, csr).proof }, // the wrong secret
    { ...enrollment(auto.token, csrFor('rack-c2')), proof: enrollment(auto.token, csrFor('rack-c2')).proof }, // made for another CSR
    { ...enrollment(auto.token, csrFor('rack-c3')), token_id: 'zzzzzzzzzz' }, // unknown token
    enrollment(auto.token, csrFor('other-c4')), // outside rack-*
    enrollment(revoked.token, csrFor('rack-c5')),
    enrollment(expired.token, csrFor('rack-c6')),
    enrollment(usedUp.token, csrFor('rack-c7')),
  ]
  const ids: string[] = []
  for (const body of bodies) {
    const reply = await toListener('/v1/enroll', { body, localAddress: `127.0.1.${ids.length + 1}` })
    t.equal(reply.status, 202)
    ids.push(reply.json.request_id as string)
  }
  await signerPass()
  const reasons = await Promise.all(ids.map(async (id) => (await toListener(`/v1/enroll/${id}`)).json))
  t.match(reasons[0], { status: 'denied', reason: /proof does not hold/ })
  t.match(reasons[1], { status: 'denied', reason: /proof does not hold/ })
  t.match(reasons[2], { status: 'denied', reason: /unknown token/ })
  t.match(reasons[3], { status: 'denied', reason: /outside the token's pattern/ })
  t.match(reasons[4], { status: 'denied', reason: /was revoked/ })
  t.match(reasons[5], { status: 'denied', reason: /expired at/ })
  t.match(reasons[6], { status: 'denied', reason: /no use left/ })
  t.ok(audit().filter((l) => l.event === 'enroll_denied').length >= 7, 'each denial audited')
  t.match(audit().find((l) => l.event === 'enroll_denied' && /was revoked/.test(String(l.reason))), { name: 'rack-c5', signer: 'ca-signer' })
})

t.test('floods: one address and one token are held to their share while others are served', async (t) => {
  const from = (address: string, token = auto.token) => toListener('/v1/enroll', { body: enrollment(token, csrFor(`rack-f${Math.random().toString(36).slice(2, 8)}`)), localAddress: address })
  for (let i = 0; i < 3; i++) t.equal((await from('127.0.2.1')).status, 202)
  const held = await from('127.0.2.1')
  t.equal(held.status, 429, 'a fourth pending request from one address')
  t.equal(held.json.error, 'rate_limited')
  t.ok(Number(held.headers['retry-after']) > 0)
  t.equal((await from('127.0.2.2')).status, 202, 'another address is served')
  const flood = await createToken(pki.dir, { names: 'rack-*', uses: 100 })
  for (let i = 0; i < 4; i++) t.equal((await from(`127.0.3.${i + 1}`, flood.token)).status, 202)
  t.equal((await from('127.0.3.9', flood.token)).status, 429, 'a fifth pending request under one token')
  const third = await createToken(pki.dir, { names: 'rack-*', uses: 10 })
  t.equal((await from('127.0.3.10', third.token)).status, 202, 'another token is served')
  await signerPass() // answers free the places
  t.equal((await from('127.0.2.1')).status, 202, 'once answered, the address is served again')
})

t.test('only a signer pulls and answers; a signer is no node; a certificate that does not fit its request is refused and audited', async (t) => {
  const node = await bundle(pki, 'rack-d0', 'node')
  for (const id of [node, operator]) {
    t.equal((await mtls(id, '/v1/enroll/requests')).status, 403, 'GET /v1/enroll/requests')
    t.equal((await mtls(id, '/v1/enroll/requests/AAAAAAAAAAAAAAAAAAAAAA', { body: { denied: 'x' } })).status, 403, 'POST an answer')
  }
  t.equal((await mtls(signer, '/v1/checkin', { body: checkinBody('ca-signer') })).status, 403, 'a signer cannot check in')
  t.equal((await mtls(signer, '/v1/identify', { body: { node_id: 'ca-signer', shard_id: 0 } })).status, 403)
  t.equal((await mtls(signer, '/v1/plan')).status, 403)
  const csr = csrFor('rack-d1')
  // the misfits below are real certificates of the name: the request re-enrolls it, which this token allows
  const allow = await createToken(pki.dir, { names: 'rack-*', reenroll: 'allow' })
  const { request_id } = (await toListener('/v1/enroll', { body: enrollment(allow.token, csr), localAddress: '127.0.4.1' })).json
  const otherKey = (await signPass(pki.dir, [fake('rack-d1', csrFor('rack-d1'))])).outcomes[0] as { issued: { certificate: string } }
  const otherName = (await signPass(pki.dir, [fake('rack-d9', csrFor('rack-d9'))])).outcomes[0] as { issued: { certificate: string } }
  const foreign = join(root, 'foreign')
  mkdirSync(foreign, { recursive: true })
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(foreign, 'ca.key'), '-out', join(foreign, 'ca.pem'), '-subj', '/CN=Foreign CA', '-days', '2'], { stdio: 'ignore' })
  const foreignCa = opensslCert(pki, join(root, 'foreign'), 'foreign', '/CN=rack-d1/OU=node', ['extendedKeyUsage=clientAuth'], { caKey: join(root, 'foreign', 'ca.key'), caCert: join(root, 'foreign', 'ca.pem') })
  const opRole = await bundle(pki, 'rack-d1', 'operator')
  const before = audit().filter((l) => l.event === 'enroll_refused').length
  for (const [what, certificate] of [
    ['another key', otherKey.issued.certificate],
    ['another name', otherName.issued.certificate],
    ['another CA', foreignCa.cert],
    ['the role operator', opRole.cert],
    ['not a certificate', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'],
  ] as const) {
    const reply = await mtls(signer, `/v1/enroll/requests/${request_id}`, { body: { certificate } })
    t.equal(reply.status, 400, `${what}: 400`)
    t.match(reply.json.message, /does not fit the request|must be one PEM certificate/, what)
  }
  t.equal(audit().filter((l) => l.event === 'enroll_refused').length - before, 5, 'each one audited')
  t.same((await toListener(`/v1/enroll/${request_id}`)).json, { status: 'pending' }, 'the request still waits')
  await revoke(pki.dir, { serial: opRole.serial }) // a token never takes an operator's name over: the misfit goes first
  await signerPass()
  t.equal((await toListener(`/v1/enroll/${request_id}`)).json.status, 'issued')
  const twice = await mtls(signer, `/v1/enroll/requests/${request_id}`, { body: { denied: 'late' } })
  t.equal(twice.status, 409, 'an answered request is not answered again')
})

t.test('renewal: served to the certificate on record, polled by the same node only', async (t) => {
  const first = await bundle(pki, 'rack-r1', 'node')
  t.equal((await mtls(first, '/v1/checkin', { body: checkinBody('rack-r1') })).status, 200)
  const renew = await mtls(first, '/v1/renew', { body: { csr: csrFor('rack-r1') } })
  t.equal(renew.status, 202)
  t.equal((await mtls(first, '/v1/renew', { body: { csr: csrFor('rack-r9') } })).status, 400, "a CSR for another name than the certificate's")
  const newer = await bundle(pki, 'rack-r1', 'node') // a newer certificate of the name, not checked in yet
  const conflict = await mtls(newer, '/v1/renew', { body: { csr: csrFor('rack-r1') } })
  t.equal(conflict.status, 409, 'a certificate other than the one on record may not renew')
  t.equal(conflict.json.error, 'identity_conflict')
  const other = await bundle(pki, 'rack-r2', 'node')
  t.equal((await mtls(other, `/v1/renew/${renew.json.request_id}`)).status, 404, "another node cannot read this node's renewal")
  t.same((await mtls(first, `/v1/renew/${renew.json.request_id}`)).json, { status: 'pending' })
  const [pulled] = (await pull()).filter((r) => r.request_id === renew.json.request_id)
  t.match(pulled, { kind: 'renew', name: 'rack-r1', token_id: null, proof: null, presenting_serial: first.serial.replace(/^0+/, '') })
})

t.test('a restart keeps the queue (pending and issued), the signer still gets the proof, and no proof or secret is in any file', async (t) => {
  const csr = csrFor('rack-s1')
  const body = enrollment(auto.token, csr)
  const { request_id } = (await toListener('/v1/enroll', { body, localAddress: '127.0.5.1' })).json
  await ctl.running.stop()
  ctl = await startTestController(pki, join(root, 'c1'), enrollConfig, { logger: logger() })
  t.same((await toListener(`/v1/enroll/${request_id}`)).json, { status: 'pending' }, 'pending across the restart')
  const [again] = (await pull()).filter((r) => r.request_id === request_id)
  t.equal(again!.proof, body.proof, 'the sealed proof opens after the restart')
  await signerPass()
  t.equal((await toListener(`/v1/enroll/${request_id}`)).json.status, 'issued')
  const secret = parseToken(auto.token).secret.toString('base64url')
  const stateDir = join(ctl.root, 'state')
  const files = readdirSync(stateDir).map((f) => readFileSync(join(stateDir, f), 'latin1'))
  t.ok(files.some((text) => text.includes(request_id)), 'the queue is in the state directory')
  for (const text of [...files, readFileSync(join(ctl.root, 'audit.log'), 'latin1'), readFileSync(logFile, 'latin1')]) {
    t.notOk(text.includes(body.proof), 'no proof')
    t.notOk(text.includes(secret), 'no token secret')
  }
})

/** A request as the signer would pull it, for a certificate made outside the controller. */
function fake(name: string, csr: string, token = auto.token): PulledRequest {
  return { request_id: 'x', kind: 'enroll', name, csr, token_id: parseToken(token).id, proof: enrollment(token, csr).proof, source: 'test', presenting_serial: null, created_at: new Date().toISOString() }
}

/** A key of `args` and its CSR, made by openssl req. */
function opensslCsrPem(label: string, subject: string, args: string[]): string {
  const work = join(root, 'csr')
  mkdirSync(work, { recursive: true })
  execFileSync('openssl', ['req', '-new', ...args, '-nodes', '-keyout', join(work, `${label}.key`), '-out', join(work, `${label}.csr`), '-subj', subject], { stdio: 'ignore' })
  return readFileSync(join(work, `${label}.csr`), 'utf8')
}
