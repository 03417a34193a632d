import t from 'tap'
import { X509Certificate } from 'node:crypto'
import { readFile, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { initPki, issueServerCert, issueBundle, listCerts, readIndex } from '../../pki/toolkit.js'
import { newSerial, normalizeSerial } from '../../pki/serial.js'
import { fingerprint, modeOf, openssl } from './helpers.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const dir = join(root, 'pki')
const outParent = join(root, 'elsewhere')

t.before(async () => {
  await initPki(dir)
  await issueServerCert(dir, { dns: ['controller.example', 'localhost'], ip: ['127.0.0.1', '::1'] })
  await issueBundle(dir, 'node-1', 'node')
  await issueBundle(dir, 'alice_ops', 'operator', { days: 30, outDir: outParent })
})

const pem = (path: string) => readFile(path, 'utf8')
const extKeyUsage = (c: X509Certificate): string[] | undefined =>
  (c as unknown as { extKeyUsage?: string[] }).extKeyUsage ?? c.keyUsage

t.test('CA: self-signed RSA 3072, CA:true pathlen 0 and keyCertSign/cRLSign (critical), SHA-256', async (t) => {
  const ca = new X509Certificate(await pem(join(dir, 'ca.pem')))
  t.equal(ca.ca, true)
  t.equal(ca.publicKey.asymmetricKeyDetails?.modulusLength, 3072)
  t.ok(ca.verify(ca.publicKey), 'self-signature verifies in Node')
  const years = (Date.parse(ca.validTo) - Date.parse(ca.validFrom)) / (365 * 86_400_000)
  t.ok(years > 9.9 && years < 10.1, `valid 10 years (got ${years.toFixed(2)})`)
  const text = (await openssl(['x509', '-in', join(dir, 'ca.pem'), '-noout', '-text'])).out
  t.match(text, /Signature Algorithm: sha256WithRSAEncryption/)
  t.match(text, /Basic Constraints: critical\s+CA:TRUE, pathlen:0/)
  t.match(text, /Key Usage: critical\s+Certificate Sign, CRL Sign/)
  t.match(text, /Subject Key Identifier/)
  t.notMatch(text, /Signature Algorithm: sha1/)
})

t.test('node and operator certificates: subject, EKU clientAuth only, key usages, AKI/SKI, validity', async (t) => {
  const ca = new X509Certificate(await pem(join(dir, 'ca.pem')))
  const cases = [
    { path: join(dir, 'bundles', 'node-1', 'cert.pem'), subject: 'CN=node-1\nOU=node', days: 90 },
    { path: join(outParent, 'alice_ops', 'cert.pem'), subject: 'CN=alice_ops\nOU=operator', days: 30 },
  ]
  for (const c of cases) {
    const cert = new X509Certificate(await pem(c.path))
    t.equal(cert.subject, c.subject)
    t.equal(cert.issuer, ca.subject)
    t.equal(cert.ca, false)
    t.ok(cert.checkIssued(ca) && cert.verify(ca.publicKey), 'signed by our CA (checked by Node)')
    t.same(extKeyUsage(cert), ['1.3.6.1.5.5.7.3.2'])
    t.equal(cert.publicKey.asymmetricKeyDetails?.modulusLength, 2048)
    t.equal((Date.parse(cert.validTo) - Date.parse(cert.validFrom)) / 86_400_000, c.days)
    const verify = await openssl(['verify', '-x509_strict', '-purpose', 'sslclient', '-CAfile', join(dir, 'ca.pem'), c.path])
    t.ok(verify.ok, verify.out)
    const text = (await openssl(['x509', '-in', c.path, '-noout', '-text'])).out
    t.match(text, /Signature Algorithm: sha256WithRSAEncryption/)
    t.match(text, /Basic Constraints: critical\s+CA:FALSE/)
    t.match(text, /Key Usage: critical\s+Digital Signature, Key Encipherment/)
    t.match(text, /Extended Key Usage: \s*TLS Web Client Authentication\s/)
    t.notMatch(text, /TLS Web Server Authentication/)
    t.match(text, /Authority Key Identifier/)
    t.match(text, /Subject Key Identifier/)
  }
})

t.test('server certificate: serverAuth with the DNS and IP SANs', async (t) => {
  const cert = new X509Certificate(await pem(join(dir, 'server.pem')))
  t.same(extKeyUsage(cert), ['1.3.6.1.5.5.7.3.1'])
  t.equal(cert.subjectAltName, 'DNS:controller.example, DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1')
  t.equal(cert.checkHost('localhost'), 'localhost')
  t.equal(cert.checkIP('127.0.0.1'), '127.0.0.1')
  const verify = await openssl(['verify', '-x509_strict', '-purpose', 'sslserver', '-CAfile', join(dir, 'ca.pem'), join(dir, 'server.pem')])
  t.ok(verify.ok, verify.out)
})

t.test('serials: 16 random bytes, positive, unique, the same in the index and the certificates', async (t) => {
  const index = await readIndex(dir)
  const files = [join(dir, 'ca.pem'), join(dir, 'server.pem'), join(dir, 'bundles', 'node-1', 'cert.pem'), join(outParent, 'alice_ops', 'cert.pem')]
  const serials = await Promise.all(files.map(async (f) => new X509Certificate(await pem(f)).serialNumber.toLowerCase()))
  t.same(serials, index.certs.map((c) => c.serial))
  t.equal(new Set(serials).size, serials.length)
  for (const s of serials) {
    t.equal(s.length, 32, 'exactly 16 bytes, no sign-padding byte needed')
    t.ok(Number.parseInt(s.slice(0, 2), 16) >= 0x10 && Number.parseInt(s.slice(0, 2), 16) < 0x80, 'positive, first byte never 0')
  }
  const many = Array.from({ length: 2000 }, newSerial)
  t.equal(new Set(many).size, many.length, 'no repeats')
  t.ok(many.every((s) => /^[1-7][0-9a-f]{31}$/.test(s)), 'the random high bit is always cleared, never a leading 0')
  t.equal(normalizeSerial('0A:1B:C2'), 'a1bc2', 'case, colons and leading zeros are ignored on input')
})

t.test('private keys are 0600 and every folder holding one is 0700', async (t) => {
  for (const f of ['ca-key.pem', 'server-key.pem', 'plan-keys.json']) t.equal(await modeOf(join(dir, f)), 0o600, f)
  t.equal(await modeOf(join(dir, 'bundles', 'node-1', 'key.pem')), 0o600)
  t.equal(await modeOf(join(outParent, 'alice_ops', 'key.pem')), 0o600)
  for (const d of [dir, join(dir, 'bundles'), join(dir, 'bundles', 'node-1'), outParent, join(outParent, 'alice_ops')]) {
    t.equal(await modeOf(d), 0o700, d)
  }
})

t.test('a bundle holds exactly key, cert, CA and plan JWKS; the key matches the certificate', async (t) => {
  const bundle = join(dir, 'bundles', 'node-1')
  t.same((await readdir(bundle)).sort(), ['ca.pem', 'cert.pem', 'key.pem', 'plan-jwks.json'])
  t.equal(await pem(join(bundle, 'ca.pem')), await pem(join(dir, 'ca.pem')))
  t.equal(await pem(join(bundle, 'plan-jwks.json')), await pem(join(dir, 'plan-jwks.json')))
  const { createPrivateKey } = await import('node:crypto')
  const cert = new X509Certificate(await pem(join(bundle, 'cert.pem')))
  t.ok(cert.checkPrivateKey(createPrivateKey(await pem(join(bundle, 'key.pem')))))
})

t.test('init and issue refuse to overwrite, and change nothing', async (t) => {
  const before = await fingerprint(dir)
  await t.rejects(initPki(dir), /already holds a PKI/)
  await t.rejects(issueBundle(dir, 'node-1', 'node'), /already exists/)
  t.same(await fingerprint(dir), before)
})

t.test('list reports every certificate with its status; an expired one shows as expired', async (t) => {
  const old = new Date(Date.now() - 3 * 86_400_000)
  await issueBundle(dir, 'node-old', 'node', { days: 1, notBefore: old, now: old })
  const list = await listCerts(dir)
  t.same(list.map((c) => [c.name, c.role, c.status]).slice(-3), [['node-1', 'node', 'valid'], ['alice_ops', 'operator', 'valid'], ['node-old', 'node', 'expired']])
  t.same(Object.keys(list[0]!).sort(), ['name', 'not_after', 'not_before', 'role', 'serial', 'status'])
  const expired = await openssl(['verify', '-CAfile', join(dir, 'ca.pem'), join(dir, 'bundles', 'node-old', 'cert.pem')])
  t.notOk(expired.ok)
  t.match(expired.out, /certificate has expired/)
})
