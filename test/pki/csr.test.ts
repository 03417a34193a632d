import t from 'tap'
import { X509Certificate, createPrivateKey } from 'node:crypto'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { initPki, signCsr, readIndex } from '../../pki/toolkit.js'
import { fingerprint, openssl, opensslCsr } from './helpers.js'
import { runCli } from './run-cli.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const dir = join(root, 'pki')
const work = join(root, 'device')

/** Makes a key and CSR with `openssl req` (as on a device); returns the CSR path. */
const makeCsr = async (name: string, subj: string, extra?: string[]): Promise<string> => (await opensslCsr(work, name, subj, extra)).path

t.before(async () => {
  await initPki(dir)
  const { mkdir } = await import('node:fs/promises')
  await mkdir(work)
})

t.test('a CSR made by openssl req is signed; role and extensions come from the CA, not the CSR', async (t) => {
  const csrPath = await makeCsr('node-7', '/CN=node-7/OU=operator/O=Evil', [
    '-newkey', 'rsa:2048', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'extendedKeyUsage=serverAuth',
  ])
  const out = join(work, 'node-7.pem')
  const { certPem, serial } = await signCsr(dir, await readFile(csrPath, 'utf8'), 'node', { out })
  t.equal(await readFile(out, 'utf8'), certPem)
  const cert = new X509Certificate(certPem)
  t.equal(cert.subject, 'CN=node-7\nOU=node', 'only the CN is taken; OU is the --role')
  t.equal(cert.ca, false, 'CA:TRUE asked by the CSR is ignored')
  t.same((cert as unknown as { extKeyUsage?: string[] }).extKeyUsage ?? cert.keyUsage, ['1.3.6.1.5.5.7.3.2'])
  t.equal(cert.serialNumber.toLowerCase(), serial)
  t.ok(cert.checkPrivateKey(createPrivateKey(await readFile(join(work, 'node-7.key'), 'utf8'))), 'the device key is the certified key')
  const verify = await openssl(['verify', '-x509_strict', '-purpose', 'sslclient', '-CAfile', join(dir, 'ca.pem'), out])
  t.ok(verify.ok, verify.out)
  const record = (await readIndex(dir)).certs.find((c) => c.serial === serial)
  t.match(record, { name: 'node-7', role: 'node', command: 'sign-csr' })
})

t.test('the CLI prints the signed certificate on stdout, never a key', async (t) => {
  const csrPath = await makeCsr('op-1', '/CN=op-1')
  const res = await runCli(['sign-csr', csrPath, '--role', 'operator', '--dir', dir])
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, /^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n$/)
  t.notMatch(res.stdout, /PRIVATE KEY/)
  t.equal(new X509Certificate(res.stdout).subject, 'CN=op-1\nOU=operator')
})

const pem = (der: Buffer) => `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`

/** Re-encodes the CSR's signatureAlgorithm SEQUENCE (short length) with a two-byte long-form length. */
function nonMinimalInner(der: Buffer): Buffer {
  // outer SEQUENCE: 30 82 LL LL | info SEQUENCE 30 82 .. | algorithm SEQUENCE 30 <short> ...
  const infoLen = der.readUInt16BE(6)
  const alg = 4 + 4 + infoLen
  if (der[alg] !== 0x30 || der[alg + 1]! >= 0x80) throw new Error('unexpected CSR layout')
  const body = Buffer.concat([der.subarray(4, alg), Buffer.from([0x30, 0x81, der[alg + 1]!]), der.subarray(alg + 2)])
  const head = Buffer.from([0x30, 0x82, 0, 0])
  head.writeUInt16BE(body.length, 2)
  return Buffer.concat([head, body])
}

t.test('refused CSRs change nothing', async (t) => {
  const good = await readFile(await makeCsr('node-9', '/CN=node-9'), 'utf8')
  const der = Buffer.from(good.replace(/-----[^-]+-----|\s/g, ''), 'base64')
  const at = der.indexOf('node-9')
  der.write('node-8', at) // same length: the DER still parses, the signature no longer matches
  const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`
  const cases: Array<[string, string, RegExp]> = [
    ['tampered', tampered, /signature does not verify/],
    ['bad CN', await readFile(await makeCsr('bad', '/CN=a b'), 'utf8'), /CN is not a valid name/],
    ['two CNs', await readFile(await makeCsr('two', '/CN=a/CN=b'), 'utf8'), /exactly one CN/],
    ['no CN', await readFile(await makeCsr('nocn', '/OU=node'), 'utf8'), /exactly one CN/],
    ['Ed25519 key', await readFile(await makeCsr('ed', '/CN=ed-1', ['-newkey', 'ed25519']), 'utf8'), /sign-csr accepts RSA keys of 2048 bits or more and EC keys on P-256 or P-384/],
    ['a certificate', await readFile(join(dir, 'ca.pem'), 'utf8'), /not a PEM certificate signing request/],
    ['garbage', '-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n', /not a valid certificate signing request/],
    // The one strict DER reader (src/der): a byte after the CSR, or a length in long form that fits in short form.
    ['a trailing byte', pem(Buffer.concat([Buffer.from(good.replace(/-----[^-]+-----|\s/g, ''), 'base64'), Buffer.from([0])])), /not a valid certificate signing request \(its DER does not parse\)/],
    ['a non-minimal length', pem(nonMinimalInner(Buffer.from(good.replace(/-----[^-]+-----|\s/g, ''), 'base64'))), /not a valid certificate signing request \(its DER does not parse\)/],
  ]
  for (const [what, csr, message] of cases) {
    const before = await fingerprint(dir)
    await t.rejects(signCsr(dir, csr, 'node'), message, what)
    t.same(await fingerprint(dir), before, `${what}: PKI unchanged`)
  }
  await writeFile(join(work, 'exists.pem'), 'x')
  await t.rejects(signCsr(dir, good, 'node', { out: join(work, 'exists.pem') }), /refuses to overwrite/)
  t.equal(await readFile(join(work, 'exists.pem'), 'utf8'), 'x')
})
