// Issue 11 "Handshakes": EC P-256 server and node keys, EC CSRs, every artefact checked by OpenSSL and by a real TLS handshake.
import t from 'tap'
import { X509Certificate, createPrivateKey } from 'node:crypto'
import { mkdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import tls from 'node:tls'
import type { AddressInfo } from 'node:net'
import { initPki, issueBundle, issueServerCert, signCsr, revoke } from '../../pki/toolkit.js'
import { ecKey, fingerprint, modeOf, openssl, opensslCsr } from './helpers.js'
import { cliIn } from './run-cli.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const dir = join(root, 'pki')
const work = join(root, 'device')
const caPem = join(dir, 'ca.pem')

t.before(async () => {
  await initPki(dir)
  await mkdir(work)
  await issueServerCert(dir, { dns: ['localhost'], ip: ['127.0.0.1'], keyType: 'ec' })
  await issueBundle(dir, 'node-ec', 'node', { keyType: 'ec' })
  await issueBundle(dir, 'ops-ec', 'operator', { keyType: 'ec' })
})

const text = async (path: string): Promise<string> => (await openssl(['x509', '-in', path, '-noout', '-text'])).out
/** The hex of one key identifier as `openssl x509 -text` prints it. */
const keyId = (certText: string, label: 'Subject' | 'Authority'): string | undefined =>
  new RegExp(`X509v3 ${label} Key Identifier:\\s*\\n\\s*(?:keyid:)?([0-9A-F:]+)`).exec(certText)?.[1]

t.test('server-cert and issue --key-type ec: P-256 keys, CA-signed, the extensions OpenSSL expects', async (t) => {
  const caText = await text(caPem)
  const cases = [
    { path: join(dir, 'server.pem'), key: join(dir, 'server-key.pem'), purpose: 'sslserver', eku: /Extended Key Usage: \s*TLS Web Server Authentication\s/ },
    { path: join(dir, 'bundles', 'node-ec', 'cert.pem'), key: join(dir, 'bundles', 'node-ec', 'key.pem'), purpose: 'sslclient', eku: /Extended Key Usage: \s*TLS Web Client Authentication\s/ },
    { path: join(dir, 'bundles', 'ops-ec', 'cert.pem'), key: join(dir, 'bundles', 'ops-ec', 'key.pem'), purpose: 'sslclient', eku: /Extended Key Usage: \s*TLS Web Client Authentication\s/ },
  ]
  for (const c of cases) {
    const verify = await openssl(['verify', '-x509_strict', '-purpose', c.purpose, '-CAfile', caPem, c.path])
    t.ok(verify.ok, `openssl verify: ${verify.out}`)
    const body = await text(c.path)
    t.match(body, /Public Key Algorithm: id-ecPublicKey/)
    t.match(body, /ASN1 OID: prime256v1/)
    t.match(body, /NIST CURVE: P-256/)
    t.match(body, /Signature Algorithm: sha256WithRSAEncryption/, 'signed by the RSA CA')
    t.match(body, /Basic Constraints: critical\s+CA:FALSE/)
    t.match(body, /Key Usage: critical\s+Digital Signature\n/, 'an EC key signs only (no keyEncipherment)')
    t.match(body, c.eku)
    t.equal(keyId(body, 'Authority'), keyId(caText, 'Subject'), 'AKI = the CA SKI')
    const keyPem = await readFile(c.key, 'utf8')
    t.match(keyPem, /^-----BEGIN PRIVATE KEY-----\n/, 'PKCS#8 PEM')
    t.equal(await modeOf(c.key), 0o600)
    t.ok(new X509Certificate(await readFile(c.path)).checkPrivateKey(createPrivateKey(keyPem)), 'the key is the certified key')
    // OpenSSL's own subjectKeyIdentifier=hash for the same key must equal ours.
    const selfSigned = join(work, 'ski-probe.pem')
    const probe = await openssl(['req', '-new', '-x509', '-key', c.key, '-subj', '/CN=probe', '-addext', 'subjectKeyIdentifier=hash', '-out', selfSigned])
    t.ok(probe.ok, probe.out)
    t.equal(keyId(body, 'Subject'), keyId(await text(selfSigned), 'Subject'), 'SKI computed as OpenSSL computes it')
  }
  const server = await text(join(dir, 'server.pem'))
  t.match(server, /DNS:localhost, IP Address:127\.0\.0\.1/)
})

t.test('CA self-signature and CRL signatures made with node:crypto verify under OpenSSL', async (t) => {
  const ca = await openssl(['verify', '-x509_strict', '-check_ss_sig', '-CAfile', caPem, caPem])
  t.ok(ca.ok, ca.out)
  await revoke(dir, { name: 'ops-ec' })
  const crl = await openssl(['crl', '-in', join(dir, 'crl.pem'), '-noout', '-text', '-CAfile', caPem, '-verify'])
  t.match(crl.out, /verify OK/)
  t.match(crl.out, /Signature Algorithm: sha256WithRSAEncryption/)
  const revoked = await openssl(['verify', '-crl_check', '-CAfile', caPem, '-CRLfile', join(dir, 'crl.pem'), join(dir, 'bundles', 'ops-ec', 'cert.pem')])
  t.match(revoked.out, /certificate revoked/)
})

t.test('a TLS handshake with an EC server certificate and an EC client certificate', async (t) => {
  const read = (...p: string[]) => readFile(join(dir, ...p))
  const server = tls.createServer({ ca: await read('ca.pem'), cert: await read('server.pem'), key: await read('server-key.pem'), requestCert: true, rejectUnauthorized: true })
  const seen: Array<{ cn: unknown; curve: unknown }> = []
  server.on('secureConnection', (socket) => {
    const peer = socket.getPeerCertificate()
    seen.push({ cn: peer.subject.CN, curve: (peer as { asn1Curve?: string }).asn1Curve })
    socket.end('welcome')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const socket = tls.connect({
    host: '127.0.0.1', port: (server.address() as AddressInfo).port, servername: 'localhost',
    ca: await read('ca.pem'), cert: await read('bundles', 'node-ec', 'cert.pem'), key: await read('bundles', 'node-ec', 'key.pem'),
  })
  const reply = await new Promise<string>((resolve, reject) => {
    let data = ''
    socket.on('secureConnect', () => {
      const serverCert = socket.getPeerCertificate()
      t.equal((serverCert as { asn1Curve?: string }).asn1Curve, 'prime256v1', 'the server presented its P-256 certificate')
      t.equal(socket.authorized, true, 'the client trusts the server through our CA')
    })
    socket.on('data', (d: Buffer) => (data += d.toString()))
    socket.on('error', reject)
    socket.on('close', () => resolve(data))
  })
  t.equal(reply, 'welcome')
  t.same(seen, [{ cn: 'node-ec', curve: 'prime256v1' }], 'the server authenticated the P-256 client')
})

/** A key and CSR made with `openssl req` (as on a device); returns the CSR text. */
const deviceCsr = async (label: string, cn: string, keyArgs: string[]): Promise<string> => (await opensslCsr(work, label, `/CN=${cn}`, keyArgs)).pem

t.test('sign-csr accepts EC P-256 and P-384 CSRs (ecdsa-with-SHA256/384) and keeps the device key', async (t) => {
  const cases = [
    { label: 'p256', keyArgs: ecKey('P-256'), oid: /ASN1 OID: prime256v1/ },
    { label: 'p384', keyArgs: [...ecKey('P-384'), '-sha384'], oid: /ASN1 OID: secp384r1/ },
  ]
  for (const c of cases) {
    const out = join(work, `${c.label}.pem`)
    const { certPem } = await signCsr(dir, await deviceCsr(c.label, `node-${c.label}`, c.keyArgs), 'node', { out })
    const cert = new X509Certificate(certPem)
    t.equal(cert.subject, `CN=node-${c.label}\nOU=node`)
    t.ok(cert.checkPrivateKey(createPrivateKey(await readFile(join(work, `${c.label}.key`), 'utf8'))), 'the device key is the certified key')
    const verify = await openssl(['verify', '-x509_strict', '-purpose', 'sslclient', '-CAfile', caPem, out])
    t.ok(verify.ok, verify.out)
    const body = await text(out)
    t.match(body, /Public Key Algorithm: id-ecPublicKey/)
    t.match(body, c.oid)
    t.match(body, /Key Usage: critical\s+Digital Signature\n/)
  }
})

t.test('sign-csr refuses other keys and a tampered EC CSR, and changes nothing', async (t) => {
  const good = await deviceCsr('tamper', 'node-t1', ecKey('P-256'))
  const der = Buffer.from(good.replace(/-----[^-]+-----|\s/g, ''), 'base64')
  der.write('node-t2', der.indexOf('node-t1'))
  const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`
  const cases: Array<[string, string, RegExp]> = [
    ['P-521', await deviceCsr('p521', 'node-x', ecKey('P-521')), /EC key is on secp521r1; sign-csr accepts RSA keys of 2048 bits or more and EC keys on P-256 or P-384/],
    ['secp256k1', await deviceCsr('k1', 'node-x', ecKey('secp256k1')), /EC key is on secp256k1/],
    ['Ed25519', await deviceCsr('ed', 'node-x', ['-newkey', 'ed25519']), /accepts RSA keys of 2048 bits or more and EC keys on P-256 or P-384 \(this CSR has a ed25519 key\)/],
    ['RSA 1024', await deviceCsr('rsa1024', 'node-x', ['-newkey', 'rsa:1024']), /RSA key has 1024 bits; at least 2048/],
    ['tampered EC', tampered, /signature does not verify/],
  ]
  for (const [what, csr, message] of cases) {
    const before = await fingerprint(dir)
    await t.rejects(signCsr(dir, csr, 'node'), message, what)
    t.same(await fingerprint(dir), before, `${what}: PKI unchanged`)
  }
})

t.test('the CLI: --key-type ec, and refused combinations', async (t) => {
  const cli = (...args: string[]) => cliIn(dir, ...args)

  t.match(await cli('issue', 'node-cli', '--role', 'node', '--key-type', 'ec'), { code: 0, out: /issued node certificate [0-9a-f]{32}; bundle .*node-cli \(EC P-256 key\)/ })
  t.match(await cli('issue', 'node-bad', '--role', 'node', '--key-type', 'dsa'), { code: 2, err: /invalid --key-type "dsa": use rsa or ec/ })
  t.match(await cli('issue', 'node-bad', '--role', 'node', '--key-type', 'ec', '--key-bits', '3072'), { code: 2, err: /--key-bits applies to RSA keys only/ })
  t.match(await cli('server-cert', '--dns', 'localhost', '--key-type', 'ec'), { code: 0, out: /issued server certificate [0-9a-f]{32} \(EC P-256\)/ })
  for (const command of ['issue', 'server-cert']) t.match((await cli(command, '--help')).out, /--key-type ec makes a P-256 key/)
})

t.test("node-forge's hashing, key and signing code has no role: the PKI still works with it sabotaged", async (t) => {
  const forge = (await import('node-forge')).default
  const saved = { sha256: forge.md.sha256.create, sha1: forge.md.sha1.create, fromPem: forge.pki.privateKeyFromPem, generate: forge.pki.rsa.generateKeyPair }
  const refuse = (): never => {
    throw new Error('forge crypto used')
  }
  forge.md.sha256.create = refuse
  forge.md.sha1.create = refuse
  forge.pki.privateKeyFromPem = refuse
  forge.pki.rsa.generateKeyPair = refuse
  t.teardown(() => {
    forge.md.sha256.create = saved.sha256
    forge.md.sha1.create = saved.sha1
    forge.pki.privateKeyFromPem = saved.fromPem
    forge.pki.rsa.generateKeyPair = saved.generate
  })
  const other = join(root, 'sabotaged')
  await initPki(other)
  await issueServerCert(other, { dns: ['localhost'], ip: [], keyType: 'ec' })
  await issueBundle(other, 'node-s', 'node', { keyType: 'ec' })
  await revoke(other, { name: 'node-s' })
  const verify = await openssl(['verify', '-x509_strict', '-CAfile', join(other, 'ca.pem'), join(other, 'bundles', 'node-s', 'cert.pem')])
  t.ok(verify.ok, verify.out)
  const crl = await openssl(['crl', '-in', join(other, 'crl.pem'), '-noout', '-CAfile', join(other, 'ca.pem'), '-verify'])
  t.match(crl.out, /verify OK/)
})
