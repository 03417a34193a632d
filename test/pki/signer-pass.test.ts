// The signer's judgement on the CA host (SPEC "Device enrollment and renewal"): every check again, uses spent
// only at issue, a re-enrollment per the token's --reenroll revoking what it supersedes, renewals by the
// newest node certificate only. Certificates are checked by OpenSSL against the CA.
import t from 'tap'
import { generateKeyPairSync, X509Certificate } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { initPki, issueBundle, listCerts } from '../../pki/toolkit.js'
import { createToken, findToken, revokeToken } from '../../pki/token-store.js'
import { crlNeedsRefresh, crlWindow, signPass, type SignerOutcome } from '../../pki/enroll-issue.js'
import type { PulledRequest } from '../../pki/enroll-judge.js'
import { enrollProof, parseToken } from '../../src/core/enroll-token.js'
import { buildCsr, csrDer } from '../../src/der/csr.js'
import { fingerprint, openssl, opensslCsr } from './helpers.js'

const root = await mkdtemp(join(tmpdir(), 'pki-signer-'))
t.teardown(() => rm(root, { recursive: true, force: true }))
const dir = join(root, 'pki')
await initPki(dir)
let n = 0

function request(name: string, token: string | null, over: Partial<PulledRequest> & { csr?: string } = {}): PulledRequest {
  const csr = over.csr ?? buildCsr(name, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey)
  const parsed = token === null ? null : parseToken(token)
  return {
    request_id: `r${++n}`, kind: 'enroll', name, csr, token_id: parsed?.id ?? null,
    proof: parsed === null ? null : proofOver(parsed.secret, csr), source: '10.0.0.1', presenting_serial: null, created_at: new Date().toISOString(), ...over,
  }
}

/** The proof over the CSR's DER; for text that is no CSR, a proof over its bytes (the CSR is refused first). */
function proofOver(secret: Buffer, csr: string): string {
  try {
    return enrollProof(secret, csrDer(csr))
  } catch {
    return enrollProof(secret, Buffer.from(csr))
  }
}

async function verifiedByOpenssl(pem: string): Promise<string> {
  const file = join(root, `c${++n}.pem`)
  await writeFile(file, pem)
  const res = await openssl(['verify', '-CAfile', join(dir, 'ca.pem'), file])
  t.ok(res.ok, `openssl verify: ${res.out}`)
  return (await openssl(['x509', '-in', file, '-noout', '-subject'])).out
}

const issuedOf = (o: SignerOutcome | undefined) => (o !== undefined && 'issued' in o ? o.issued : null)
const deniedOf = (o: SignerOutcome | undefined) => (o !== undefined && 'denied' in o ? o.denied : null)

t.test('an auto token issues a node certificate for the CSR key, spends one use, and the index records it', async (t) => {
  const { token } = await createToken(dir, { names: 'rack7-*', uses: 2, approve: 'auto' })
  const req = request('rack7-a', token)
  const { outcomes, crl } = await signPass(dir, [req])
  const issued = issuedOf(outcomes[0])!
  t.equal(issued.rule, 'token_auto')
  t.match(await verifiedByOpenssl(issued.certificate), /CN ?= ?rack7-a, OU ?= ?node|OU ?= ?node, CN ?= ?rack7-a|CN=rack7-a/)
  const cert = new X509Certificate(issued.certificate)
  t.match(cert.subject, /OU=node/)
  const days = (Date.parse(cert.validTo) - Date.parse(cert.validFrom)) / 86_400_000
  t.equal(Math.round(days), 1, 'a day by default')
  t.equal(crl, null)
  t.equal((await findToken(dir, parseToken(token).id))!.uses_left, 1)
  t.ok((await listCerts(dir)).some((c) => c.serial === issued.serial && c.name === 'rack7-a' && c.role === 'node'))
})

t.test('refusals: each one denied with its reason, no use spent, nothing written', async (t) => {
  const { token } = await createToken(dir, { names: 'rack8-*', uses: 5 })
  const other = await createToken(dir, { names: '*' })
  const revoked = await createToken(dir, { names: '*' })
  await revokeToken(dir, revoked.entry.id)
  const expired = await createToken(dir, { names: '*', ttlMs: 60_000, now: new Date(Date.now() - 120_000) })
  const spent = await createToken(dir, { names: '*', uses: 1 })
  await signPass(dir, [request('spent-1', spent.token)])
  const good = request('rack8-x', token)
  const weak = await opensslCsr(root, 'weak', '/CN=rack8-weak', ['-newkey', 'rsa:1024'])
  const forged = csrDer(buildCsr('rack8-forged', generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey))
  forged[forged.length - 5] = forged[forged.length - 5]! ^ 0xff
  const forgedPem = `-----BEGIN CERTIFICATE REQUEST-----\n${forged.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`
  const cases: [string, PulledRequest, RegExp][] = [
    ['a wrong proof', { ...good, request_id: 'w1', proof: enrollProof(parseToken(other.token).secret, csrDer(good.csr)) }, /proof does not hold/],
    ['a proof made for another CSR', { ...request('rack8-y', token), request_id: 'w2', proof: good.proof }, /proof does not hold/],
    ['no proof', { ...request('rack8-z', token), proof: null }, /proof does not hold/],
    ['an unknown token', { ...request('rack8-u', token), token_id: 'bbbbbbbbbb' }, /unknown token/],
    ['a revoked token', request('rev-1', revoked.token), /was revoked/],
    ['an expired token', request('exp-1', expired.token), /expired at/],
    ['a used-up token', request('spent-2', spent.token), /no use left/],
    ['a name outside the pattern', request('rack9-x', token), /outside the token's pattern \(rack8-\*\)/],
    ['a name that breaks the name rule', request('-bad', other.token), /not a valid name/],
    ['an RSA-1024 key', request('rack8-weak', token, { csr: weak.pem }), /RSA key has 1024 bits/],
    ['a wrong self-signature', request('rack8-forged', token, { csr: forgedPem }), /signature does not verify|not a valid certificate signing request/],
    ['non-PEM', request('rack8-p', token, { csr: 'hello' }), /not a PEM certificate signing request/],
    ['a CSR naming another node', { ...request('rack8-q', token), name: 'rack8-r' }, /names another node/],
  ]
  const before = await fingerprint(dir)
  const { outcomes } = await signPass(dir, cases.map(([, req]) => req))
  cases.forEach(([what, , reason], i) => t.match(deniedOf(outcomes[i]), reason, what))
  t.same(await fingerprint(dir), before, 'nothing written: no certificate, no use spent')
})

t.test('manual tokens are held until approved; an operator name is never taken over', async (t) => {
  const { token } = await createToken(dir, { names: 'm-*', approve: 'manual', uses: 3 })
  const req = request('m-1', token)
  const before = await fingerprint(dir)
  const held = await signPass(dir, [req])
  t.match((held.outcomes[0] as { held: string }).held, /manual approval/)
  t.same(await fingerprint(dir), before)
  const approved = await signPass(dir, [req], { approving: true })
  t.equal(issuedOf(approved.outcomes[0])!.rule, 'manual')
  await issueBundle(dir, 'm-op', 'operator', { keyType: 'ec' })
  const { outcomes } = await signPass(dir, [request('m-op', token)], { approving: true })
  t.match(deniedOf(outcomes[0]), /held by a certificate of role operator/)
})

t.test('re-enrollment: manual holds, allow issues and revokes the superseded certificate in the same step (CRL returned)', async (t) => {
  const manual = await createToken(dir, { names: 'boot-*', uses: 5, reenroll: 'manual' })
  const first = issuedOf((await signPass(dir, [request('boot-1', manual.token)])).outcomes[0])!
  const again = await signPass(dir, [request('boot-1', manual.token)])
  t.match((again.outcomes[0] as { held: string }).held, /re-enrollment: boot-1 holds a valid certificate/)
  const allow = await createToken(dir, { names: 'boot-*', uses: 5, reenroll: 'allow' })
  const crlBefore = await crlWindow(dir)
  const pass = await signPass(dir, [request('boot-1', allow.token)])
  const second = issuedOf(pass.outcomes[0])!
  t.same(second.supersedes, [first.serial])
  t.type(pass.crl, 'string', 'a CRL to push')
  const certs = await listCerts(dir)
  t.equal(certs.find((c) => c.serial === first.serial)!.status, 'revoked')
  t.equal(certs.find((c) => c.serial === second.serial)!.status, 'valid')
  const file = join(root, 'crl.pem')
  await writeFile(file, pass.crl!)
  t.match((await openssl(['crl', '-in', file, '-noout', '-text'])).out, new RegExp(first.serial.replace(/^0+/, '').toUpperCase().slice(0, 8)))
  t.ok((await crlWindow(dir)).thisUpdate >= crlBefore.thisUpdate)
})

t.test('renewal: the newest node certificate renews with the same lifetime; superseded, operator and unknown ones are denied', async (t) => {
  const { token } = await createToken(dir, { names: 'ren-*', uses: 5, certTtlMs: 5 * 60_000, reenroll: 'allow' })
  const first = issuedOf((await signPass(dir, [request('ren-1', token)])).outcomes[0])!
  const renew = (serial: string, name = 'ren-1') => request(name, null, { kind: 'renew', presenting_serial: serial })
  const renewed = issuedOf((await signPass(dir, [renew(first.serial)])).outcomes[0])!
  t.equal(renewed.rule, 'renewal')
  const cert = new X509Certificate(renewed.certificate)
  t.equal(Date.parse(cert.validTo) - Date.parse(cert.validFrom), 5 * 60_000, 'the token lifetime again')
  t.same(renewed.supersedes, [], 'a renewal revokes nothing (the old one expires on its own)')
  t.match(deniedOf((await signPass(dir, [renew(first.serial)])).outcomes[0]), /superseded by a newer one/)
  const op = await issueBundle(dir, 'ren-op', 'operator', { keyType: 'ec' })
  t.match(deniedOf((await signPass(dir, [renew(op.serial, 'ren-op')])).outcomes[0]), /role operator/)
  t.match(deniedOf((await signPass(dir, [renew('abcdef')])).outcomes[0]), /not issued by this CA/)
  t.match(deniedOf((await signPass(dir, [renew(renewed.serial, 'ren-2')])).outcomes[0]), /names another node/)
})

t.test('the CRL is due for a re-sign once half its validity is gone', async (t) => {
  const w = await crlWindow(dir)
  t.notOk(crlNeedsRefresh(w, w.thisUpdate))
  const half = new Date((w.thisUpdate.getTime() + w.nextUpdate!.getTime()) / 2)
  t.ok(crlNeedsRefresh(w, half))
  t.match(await readFile(join(dir, 'crl.pem'), 'utf8'), /BEGIN X509 CRL/)
})

t.test('an answer that never reached the controller is issued again for the same request: no second use, no re-enrollment hold, renewal not superseded', async (t) => {
  const { token } = await createToken(dir, { names: 'lost-*', uses: 1, reenroll: 'manual' })
  const req = request('lost-1', token)
  const first = issuedOf((await signPass(dir, [req])).outcomes[0])!
  // the post was lost; the signer (restarted) pulls the same request again
  const again = await signPass(dir, [req])
  const second = issuedOf(again.outcomes[0])!
  t.ok(second, 'issued again, not held as a re-enrollment nor denied for a used-up token')
  t.not(second.serial, first.serial)
  t.same(second.supersedes, [first.serial], 'the undelivered certificate is revoked')
  t.equal((await findToken(dir, parseToken(token).id))!.uses_left, 0, 'one use in all')
  t.match(deniedOf((await signPass(dir, [request('lost-2', token)])).outcomes[0]), /no use left/, 'another request has no use')
  // a renewal whose answer was lost
  const renew = request('lost-1', null, { kind: 'renew', presenting_serial: second.serial })
  const r1 = issuedOf((await signPass(dir, [renew])).outcomes[0])!
  const r2 = issuedOf((await signPass(dir, [renew])).outcomes[0])
  t.ok(r2, 'the same renewal is issued again, not denied as superseded by its own lost answer')
  t.not(r2!.serial, r1.serial)
})
