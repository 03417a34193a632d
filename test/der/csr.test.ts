// The CSR a node makes in memory at boot (src/der/csr.ts): OpenSSL verifies it, our reader takes it back,
// and a request altered after signing is refused.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { createPublicKey, generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildCsr, csrDer, CsrError, readCsr } from '../../src/der/csr.js'

const dir = mkdtempSync(join(tmpdir(), 'csr-'))
t.teardown(() => execFileSync('rm', ['-rf', dir]))

t.test('buildCsr: OpenSSL verifies the request and reads the CN; readCsr returns the same key and name', async (t) => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const pem = buildCsr('rack7-node-01', privateKey)
  const file = join(dir, 'a.csr')
  writeFileSync(file, pem)
  const out = execFileSync('openssl', ['req', '-in', file, '-noout', '-verify', '-subject'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  t.match(out, /CN ?= ?rack7-node-01/)
  const csr = readCsr(pem, 'enrollment')
  t.equal(csr.name, 'rack7-node-01')
  t.equal(csr.keyDescription, 'EC P-256')
  t.ok(csr.spkiDer.equals(createPublicKey(privateKey).export({ type: 'spki', format: 'der' })))
  t.ok(csr.der.equals(csrDer(pem)))
  t.match(csr.fingerprint, /^[0-9a-f]{64}$/)
  t.not(readCsr(buildCsr('rack7-node-01', privateKey), 'enrollment').fingerprint, undefined)
})

t.test('buildCsr refuses a key that is not P-256', async (t) => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-384' })
  t.throws(() => buildCsr('x', privateKey), CsrError)
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey
  t.throws(() => buildCsr('x', rsa), CsrError)
})

t.test('readCsr refuses a request altered after signing, non-PEM and a weak RSA key', async (t) => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const der = csrDer(buildCsr('node-a', privateKey))
  // the CN's last byte: "node-a" → "node-b" (the signature no longer covers the request)
  const at = der.lastIndexOf(Buffer.from('node-a')) + 5
  const altered = Buffer.from(der)
  altered[at] = 'b'.charCodeAt(0)
  const pem = `-----BEGIN CERTIFICATE REQUEST-----\n${altered.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`
  t.throws(() => readCsr(pem, 'enrollment'), /signature does not verify/)
  t.throws(() => readCsr('hello', 'enrollment'), /not a PEM certificate signing request/)
  const weak = join(dir, 'weak')
  execFileSync('openssl', ['req', '-new', '-newkey', 'rsa:1024', '-nodes', '-keyout', `${weak}.key`, '-subj', '/CN=node-w', '-out', `${weak}.csr`], { stdio: 'ignore' })
  t.throws(() => readCsr(execFileSync('cat', [`${weak}.csr`], { encoding: 'utf8' }), 'enrollment'), /RSA key has 1024 bits; at least 2048/)
})
