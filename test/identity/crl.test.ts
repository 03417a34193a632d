import t from 'tap'
import { CrlError, normalizeSerial, parseCrl, verifyCrl, type ParsedCrl } from '../../src/identity/crl.js'
import { derToPem } from '../../src/identity/crl.js'
import { genCrl, issue, makeCa, revoke, tempDir } from './crl-openssl.js'

const dir = tempDir(t)
const ca = makeCa(dir, 'main')
const foreign = makeCa(dir, 'foreign')
const ecCa = makeCa(dir, 'ec', 'ec')

const empty = genCrl(ca)
const alice = issue(ca, 'alice')
const bob = issue(ca, 'bob')
const high = issue(ca, 'high', { serialHex: '80112233445566778899AABBCCDDEEFF' })
revoke(ca, alice)
revoke(ca, high, 'superseded')
const withTwo = genCrl(ca, { days: 3 })

function crlError(fn: () => unknown, code: string, pattern: RegExp): void {
  try {
    fn()
    t.fail(`expected CrlError ${code}: ${pattern}`)
  } catch (err) {
    t.ok(err instanceof CrlError, 'throws a CrlError')
    t.match(err, { code, message: pattern }, `${code}: ${pattern}`)
  }
}

function flipLastByte(crl: ParsedCrl): string {
  const der = Buffer.from(crl.der)
  der[der.length - 1] = (der[der.length - 1] as number) ^ 0x01
  return derToPem(der)
}

t.test('parses the fields of an openssl CRL', async (t) => {
  const first = parseCrl(empty)
  const second = parseCrl(withTwo)
  t.equal(first.crlNumber, 1n)
  t.equal(second.crlNumber, 2n)
  t.equal(first.revokedSerials.size, 0)
  t.same([...second.revokedSerials].sort(), [normalizeSerial(alice.cert.serialNumber), normalizeSerial(high.cert.serialNumber)].sort())
  t.notOk(second.revokedSerials.has(normalizeSerial(bob.cert.serialNumber)))
  t.ok(second.revokedSerials.has('80112233445566778899aabbccddeeff'), 'the 00 sign byte is stripped')
  t.equal(second.signatureAlgorithmOid, '1.2.840.113549.1.1.11')
  const days = ((second.nextUpdate?.getTime() ?? 0) - second.thisUpdate.getTime()) / 86_400_000
  t.equal(days, 3, '-crldays 3 gives nextUpdate 3 days after thisUpdate')
  t.ok(Math.abs(second.thisUpdate.getTime() - Date.now()) < 600_000, 'thisUpdate is now')
  t.equal(second.thisUpdate.getUTCMilliseconds(), 0)
  t.equal(second.pem, withTwo, 'canonical PEM equals what OpenSSL wrote')
})

t.test('verifies under its own CA, including an ECDSA CA', async (t) => {
  t.doesNotThrow(() => verifyCrl(parseCrl(withTwo), ca.cert))
  const ec = parseCrl(genCrl(ecCa))
  t.equal(ec.signatureAlgorithmOid, '1.2.840.10045.4.3.2')
  t.doesNotThrow(() => verifyCrl(ec, ecCa.cert))
})

t.test('refuses a CRL from another CA', async (t) => {
  const other = parseCrl(genCrl(foreign))
  crlError(() => verifyCrl(other, ca.cert), 'wrong_issuer', /another CA/)
  crlError(() => verifyCrl(parseCrl(withTwo), ecCa.cert), 'wrong_issuer', /another CA/)
})

t.test('refuses a tampered CRL', async (t) => {
  crlError(() => verifyCrl(parseCrl(flipLastByte(parseCrl(withTwo))), ca.cert), 'bad_signature', /does not verify/)
  // Change one byte of the revoked serial inside tbsCertList: still well-formed, no longer signed.
  const crl = parseCrl(withTwo)
  const der = Buffer.from(crl.der)
  const at = der.indexOf(Buffer.from('80112233445566778899aabbccddeeff', 'hex'))
  t.ok(at > 0)
  der[at + 5] = 0x00
  const tampered = parseCrl(derToPem(der))
  t.notOk(tampered.revokedSerials.has('80112233445566778899aabbccddeeff'))
  crlError(() => verifyCrl(tampered, ca.cert), 'bad_signature', /does not verify/)
})

t.test('refuses what is not a CRL, with clear errors', async (t) => {
  crlError(() => parseCrl(''), 'malformed', /no PEM block/)
  crlError(() => parseCrl('hello world'), 'malformed', /no PEM block/)
  crlError(() => parseCrl(alice.certPem), 'malformed', /wrong PEM label "CERTIFICATE"/)
  crlError(() => parseCrl(empty + withTwo), 'malformed', /exactly one PEM block, found 2/)
  crlError(() => parseCrl(derToPem(alice.cert.raw)), 'malformed', /not a valid CRL/)
  crlError(() => parseCrl('-----BEGIN X509 CRL-----\n!!!!\n-----END X509 CRL-----\n'), 'malformed', /base64/)
  const truncated = parseCrl(withTwo).der.subarray(0, 100)
  crlError(() => parseCrl(derToPem(truncated)), 'malformed', /not a valid CRL: .*past the end/)
  const trailing = Buffer.concat([parseCrl(withTwo).der, Buffer.from([0])])
  crlError(() => parseCrl(derToPem(trailing)), 'malformed', /trailing bytes/)
})

t.test('accepts text around the one PEM block', async (t) => {
  const crl = parseCrl(`Certificate Revocation List\n  some text\n${withTwo}`)
  t.equal(crl.crlNumber, 2n)
  t.equal(crl.pem, withTwo)
})

t.test('normalizeSerial matches X509Certificate.serialNumber', async (t) => {
  // The DER holds a 00 sign byte before a serial whose high bit is set; Node prints it without.
  t.equal(high.cert.serialNumber, '80112233445566778899AABBCCDDEEFF')
  t.equal(high.cert.raw.indexOf(Buffer.from('021100801122', 'hex')) > 0, true, 'DER has the 00 sign byte')
  t.equal(normalizeSerial(high.cert.serialNumber), '80112233445566778899aabbccddeeff')
  t.equal(normalizeSerial(bob.cert.serialNumber), normalizeSerial('10:01'))
  t.equal(normalizeSerial('0a:BC'), '0abc')
  t.equal(normalizeSerial('abc'), '0abc')
  t.equal(normalizeSerial('0000'), '00')
  crlError(() => normalizeSerial('xyz'), 'malformed', /not a hexadecimal serial/)
  crlError(() => normalizeSerial(''), 'malformed', /not a hexadecimal serial/)
})

/** One DER TLV with a definite length (long form as needed). */
function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length
  const length = n < 0x80 ? Buffer.from([n]) : (() => {
    const bytes: number[] = []
    for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v % 256)
    return Buffer.from([0x80 | bytes.length, ...bytes])
  })()
  return Buffer.concat([Buffer.from([tag]), length, content])
}

t.test('a huge INTEGER or OID is refused at once, with a short message (a CRL push must not hold the loop)', async (t) => {
  const sig = tlv(0x03, Buffer.from([0, 1, 2]))
  const hugeVersion = tlv(0x30, Buffer.concat([tlv(0x30, Buffer.concat([tlv(0x02, Buffer.alloc(700_000, 0x01)), tlv(0x30, Buffer.alloc(0))])), tlv(0x30, Buffer.alloc(0)), sig]))
  const hugeArc = Buffer.concat([Buffer.alloc(350_000, 0x81), Buffer.from([0x01])])
  const alg = tlv(0x30, tlv(0x06, hugeArc))
  const hugeOid = tlv(0x30, Buffer.concat([tlv(0x30, Buffer.concat([tlv(0x02, Buffer.from([1])), alg])), alg, sig]))
  for (const [label, der] of [['version', hugeVersion], ['algorithm OID', hugeOid]] as const) {
    const started = performance.now()
    let message = ''
    try {
      parseCrl(derToPem(der))
      t.fail(`${label}: parsed`)
    } catch (err) {
      t.ok(err instanceof CrlError, `${label}: a CrlError`)
      message = (err as Error).message
    }
    const ms = performance.now() - started
    t.ok(ms < 200, `${label}: refused in ${ms.toFixed(0)} ms`)
    t.ok(message.length < 200, `${label}: a short message (${message.length} characters): ${message}`)
  }
})
