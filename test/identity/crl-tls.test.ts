import t, { type Test } from 'tap'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import tls from 'node:tls'
import { normalizeSerial, parseCrl } from '../../src/identity/crl.js'
import { buildSecureContextOptions } from '../../src/identity/tls-crl.js'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { EXTENSION_VALUES, craftCrl } from './crl-craft.js'
import { genCrl, issue, makeCa, revoke, tempDir, type IssuedCert } from './crl-openssl.js'

const dir = tempDir(t)
const ca = makeCa(dir, 'tls')
const serverCert = issue(ca, 'controller', { server: true })
const node = issue(ca, 'node-1')
const other = issue(ca, 'node-2')
const emptyCrl = parseCrl(genCrl(ca))
revoke(ca, node)
const revokedCrl = parseCrl(genCrl(ca))

interface Outcome {
  readonly greeting: string
  readonly reused: boolean
  readonly session: Buffer | undefined
  readonly error: string | undefined
  readonly protocol: string | null
}

function contextOptions(crlPem: string, ticketKeys?: Buffer): tls.SecureContextOptions {
  const opts = buildSecureContextOptions({ ca: ca.certPem, cert: serverCert.certPem, key: serverCert.keyPem, crlPem })
  return ticketKeys === undefined ? opts : { ...opts, ticketKeys }
}

async function startServer(t: Test, crlPem: string, ticketKeys?: Buffer) {
  const clientErrors: string[] = []
  const server = tls.createServer({ ...contextOptions(crlPem, ticketKeys), requestCert: true, rejectUnauthorized: true }, (socket) => {
    socket.end(`hello ${socket.getPeerCertificate().subject.CN}`)
  })
  server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: tls.TLSSocket) => {
    clientErrors.push(`${err.code ?? err.message}/${String(socket.authorizationError)}`)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => server.close())
  return { server, port: (server.address() as AddressInfo).port, clientErrors }
}

/** Waits (a bounded number of turns) for an event the server emits around the client's close. */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((resolve) => setTimeout(resolve, 10))
}

function connect(port: number, who: IssuedCert, extra: tls.ConnectionOptions = {}): Promise<Outcome> {
  return new Promise((resolve) => {
    let greeting = ''
    let session: Buffer | undefined
    let error: string | undefined
    let reused = false
    let protocol: string | null = null
    const socket = tls.connect({ host: '127.0.0.1', port, ca: ca.certPem, cert: who.certPem, key: who.keyPem, ...extra })
    socket.on('secureConnect', () => {
      reused = socket.isSessionReused()
      protocol = socket.getProtocol()
    })
    socket.on('session', (s: Buffer) => (session = s))
    socket.on('data', (d: Buffer) => (greeting += d.toString()))
    socket.on('error', (err: NodeJS.ErrnoException) => (error = err.code ?? err.message))
    socket.on('close', () => {
      resolve({ greeting, reused, session, error, protocol })
    })
  })
}

t.test('the options are the hardened ones, with fresh ticket keys each time', async (t) => {
  const a = contextOptions(emptyCrl.pem)
  const b = contextOptions(emptyCrl.pem)
  t.equal(a.minVersion, 'TLSv1.2')
  t.equal(a.honorCipherOrder, true)
  const aead = /^(TLS_(AES_128_GCM_SHA256|AES_256_GCM_SHA384|CHACHA20_POLY1305_SHA256)|ECDHE-(ECDSA|RSA)-(AES128-GCM-SHA256|AES256-GCM-SHA384|CHACHA20-POLY1305))$/
  for (const suite of String(a.ciphers).split(':')) t.match(suite, aead, `${suite} is ECDHE + AEAD (or TLS 1.3)`)
  t.equal(a.ticketKeys?.length, 48)
  t.notOk(a.ticketKeys?.equals(b.ticketKeys as Buffer), 'new ticket keys on every build')
  t.doesNotThrow(() => tls.createSecureContext(a), 'OpenSSL accepts the options')
})

t.test('given ticket keys are used; sessions last a day and belong to the CA, not to the command line', async (t) => {
  const keys = Buffer.alloc(48, 9)
  const opts = buildSecureContextOptions({ ca: ca.certPem, cert: serverCert.certPem, key: serverCert.keyPem, crlPem: emptyCrl.pem, ticketKeys: keys })
  t.equal(opts.ticketKeys, keys)
  t.equal(opts.sessionTimeout, 86_400, 'resumable for 24 h (Node would say 5 minutes)')
  t.equal(opts.sessionIdContext, contextOptions(revokedCrl.pem).sessionIdContext, 'the same context under another CRL')
  const otherCa = makeCa(dir, 'tls-other')
  const foreign = buildSecureContextOptions({ ca: otherCa.certPem, cert: serverCert.certPem, key: serverCert.keyPem, crlPem: emptyCrl.pem })
  t.not(foreign.sessionIdContext, opts.sessionIdContext, 'another CA, another context: its sessions are not resumed here')
  t.ok(String(opts.sessionIdContext).length <= 32, "within OpenSSL's 32 bytes")
})

t.test('a server built again from the same material and keys (a restart) resumes the sessions of the first', async (t) => {
  const keys = Buffer.alloc(48, 5)
  const first = await startServer(t, emptyCrl.pem, keys)
  const before = await connect(first.port, node, { maxVersion: 'TLSv1.3' })
  t.ok(before.session)
  first.server.close()
  const second = await startServer(t, emptyCrl.pem, keys)
  const resumed = await connect(second.port, node, { maxVersion: 'TLSv1.3', session: before.session })
  t.equal(resumed.reused, true)
  t.equal(resumed.greeting, 'hello node-1')
  const otherKeys = await startServer(t, emptyCrl.pem, Buffer.alloc(48, 6))
  t.equal((await connect(otherKeys.port, node, { maxVersion: 'TLSv1.3', session: before.session })).reused, false, 'other keys: a full handshake')
})

t.test('setTicketKeys (the rotation by age) ends resumption of older sessions on a running server', async (t) => {
  const { server, port } = await startServer(t, emptyCrl.pem, Buffer.alloc(48, 1))
  const before = await connect(port, node, { maxVersion: 'TLSv1.3' })
  t.equal((await connect(port, node, { maxVersion: 'TLSv1.3', session: before.session })).reused, true)
  server.setTicketKeys(Buffer.alloc(48, 2))
  const after = await connect(port, node, { maxVersion: 'TLSv1.3', session: before.session })
  t.equal(after.reused, false, 'a full handshake')
  t.equal(after.greeting, 'hello node-1', 'and served')
})

t.test("a CRL's revoked serials compare with peer serials in their normalised form (as principal.ts stores them)", async (t) => {
  const isRevoked = (serialNumber: string, crl: typeof revokedCrl) => crl.revokedSerials.has(normalizeSerial(serialNumber))
  t.ok(isRevoked(node.cert.serialNumber, revokedCrl))
  t.notOk(isRevoked(other.cert.serialNumber, revokedCrl))
  t.notOk(isRevoked(node.cert.serialNumber, emptyCrl))
})

for (const version of ['TLSv1.3', 'TLSv1.2'] as const) {
  t.test(`${version}: a CRL installed with setSecureContext refuses new handshakes and old sessions`, async (t) => {
    const { server, port, clientErrors } = await startServer(t, emptyCrl.pem)
    const opts = { maxVersion: version, minVersion: version }
    const before = await connect(port, node, opts)
    t.equal(before.greeting, 'hello node-1', 'served before the revocation')
    t.equal(before.protocol, version)
    t.ok(before.session, 'the client got a resumable session')
    const resumedBefore = await connect(port, node, { ...opts, session: before.session })
    t.equal(resumedBefore.reused, true, 'sessions do resume while nothing changed')

    server.setSecureContext(contextOptions(revokedCrl.pem))
    const fresh = await connect(port, node, opts)
    t.equal(fresh.greeting, '', 'a new handshake of the revoked node is not served')
    await until(() => clientErrors.length > 0)
    t.match(clientErrors, [/\/CERT_REVOKED$/], 'the server saw the handshake fail with OpenSSL\'s CERT_REVOKED')
    t.comment(`new handshake: client error ${fresh.error}, server tlsClientError ${clientErrors.join(',')}`)
    const resumed = await connect(port, node, { ...opts, session: before.session })
    t.equal(resumed.greeting, '', 'the pre-revocation session does not get the revoked node in')
    t.equal(resumed.reused, false, 'the old session was not resumed')
    t.comment(`resumption attempt: client error ${resumed.error}, reused ${resumed.reused}`)
    const bystander = await connect(port, other, opts)
    t.equal(bystander.greeting, 'hello node-2', 'other nodes are unaffected')
  })
}

t.test('why fresh ticket keys matter: with the old keys kept, a revoked node resumes', async (t) => {
  // Documents the OpenSSL behaviour the fresh keys defend against: resumption skips the CRL check.
  const keys = Buffer.alloc(48, 7)
  const { server, port } = await startServer(t, emptyCrl.pem, keys)
  const opts = { maxVersion: 'TLSv1.3', minVersion: 'TLSv1.3' } as const
  const before = await connect(port, node, opts)
  t.ok(before.session)
  server.setSecureContext(contextOptions(revokedCrl.pem, keys))
  const fresh = await connect(port, node, opts)
  t.equal(fresh.greeting, '', 'a full handshake is refused')
  const resumed = await connect(port, node, { ...opts, session: before.session })
  t.comment(`same ticket keys: reused ${resumed.reused}, greeting ${JSON.stringify(resumed.greeting)}`)
  t.equal(resumed.reused, true, 'the old ticket still resumes: the CRL is not consulted')
  t.equal(resumed.greeting, 'hello node-1', 'and the revoked node is served: hence per-request checks too')
})

t.test('OpenSSL fails closed on a CRL past its nextUpdate: every client is refused', async (t) => {
  // Why the watcher warns a day ahead: an expired CRL in the context locks out valid nodes too.
  const day = 86_400_000
  const expired = parseCrl(genCrl(ca, { lastUpdate: new Date(Date.now() - 2 * day), nextUpdate: new Date(Date.now() - day) }))
  t.ok((expired.nextUpdate?.getTime() ?? Infinity) < Date.now())
  const { port, clientErrors } = await startServer(t, expired.pem)
  const outcome = await connect(port, other, { maxVersion: 'TLSv1.3' })
  t.equal(outcome.greeting, '', 'a valid, unrevoked node is refused')
  await until(() => clientErrors.length > 0)
  t.match(clientErrors, [/\/CRL_HAS_EXPIRED$/])
})

t.test('OpenSSL fails closed on a CRL whose thisUpdate is in the future, with no tolerance', async (t) => {
  // Why a CRL from a CA host with a fast clock waits as pending instead of being installed.
  const ahead = parseCrl(genCrl(ca, { lastUpdate: new Date(Date.now() + 120_000) }))
  const { port, clientErrors } = await startServer(t, ahead.pem)
  const outcome = await connect(port, other, { maxVersion: 'TLSv1.3' })
  t.equal(outcome.greeting, '', 'a valid, unrevoked node is refused two minutes early')
  await until(() => clientErrors.length > 0)
  t.match(clientErrors, [/\/CRL_NOT_YET_VALID$/])
})

t.test("Node's own OpenSSL refuses every client under a CRL with a critical CRL number, as the openssl CLI does", async (t) => {
  // Ties test/identity/crl-critical.test.ts (judged by the openssl CLI) to the OpenSSL Node runs on.
  const now = Date.now()
  const crlWithNumber = (critical: boolean) => craftCrl({
    caCertPem: ca.certPem,
    caKeyPem: readFileSync(join(ca.dir, 'ca-key.pem'), 'utf8'),
    thisUpdate: new Date(now - 60_000),
    nextUpdate: new Date(now + 86_400_000),
    extensions: [{ oid: '2.5.29.20', critical, value: EXTENSION_VALUES.crlNumber(9) }],
  })
  const plain = await startServer(t, crlWithNumber(false))
  t.equal((await connect(plain.port, other)).greeting, 'hello node-2', 'the same CRL with a non-critical number: served')
  const { port, clientErrors } = await startServer(t, crlWithNumber(true))
  const outcome = await connect(port, other)
  t.equal(outcome.greeting, '', 'critical: a valid, unrevoked node is refused')
  await until(() => clientErrors.length > 0)
  // Node has no name for X509_V_ERR_UNHANDLED_CRITICAL_CRL_EXTENSION: the reason shows as UNSPECIFIED.
  t.comment(`server saw: ${clientErrors.join(', ')}`)
  t.equal(clientErrors.length, 1, 'the server refused the handshake')
})
