import t from 'tap'
import { MAX_FUTURE_THIS_UPDATE_MS, decideCrl, expiringIn } from '../../src/identity/crl-decide.js'
import { parseCrl } from '../../src/identity/crl.js'
import { genCrl, issue, makeCa, revoke, tempDir } from './crl-openssl.js'

const dir = tempDir(t)
const ca = makeCa(dir, 'decide', 'ec')
const numbered = genCrl(ca)
const v1 = genCrl(ca, { v1: true })
revoke(ca, issue(ca, 'dave'))
const v1later = genCrl(ca, { v1: true })
const numbered2 = genCrl(ca)
const now = Date.now()

t.test('a v1 CRL parses, with no CRL number', async (t) => {
  const crl = parseCrl(v1later)
  t.equal(crl.crlNumber, null)
  t.equal(crl.revokedSerials.size, 1)
  t.equal(parseCrl(numbered2).crlNumber, 2n, 'v1 CRLs did not consume CRL numbers')
})

t.test('numbers must grow; without numbers thisUpdate must not go back', async (t) => {
  const current = parseCrl(numbered)
  t.match(decideCrl(current, numbered2, ca.cert, now), { kind: 'load', crl: { crlNumber: 2n } })
  t.match(decideCrl(parseCrl(numbered2), numbered, ca.cert, now), { kind: 'refuse', reason: 'older_crl' })
  t.match(decideCrl(current, numbered, ca.cert, now), { kind: 'same' })
  t.match(decideCrl(current, v1, ca.cert, now), { kind: 'refuse', reason: 'missing_crl_number' })
  t.match(decideCrl(parseCrl(v1), v1later, ca.cert, now), { kind: 'load' })
  t.match(decideCrl(parseCrl(v1), numbered2, ca.cert, now), { kind: 'load' }, 'a numbered CRL may follow a v1 one')
})

t.test('a thisUpdate far in the future is refused (OpenSSL would refuse every client)', async (t) => {
  const current = parseCrl(numbered)
  const early = parseCrl(numbered2).thisUpdate.getTime() - MAX_FUTURE_THIS_UPDATE_MS - 1000
  t.match(decideCrl(current, numbered2, ca.cert, early), { kind: 'refuse', reason: 'not_yet_valid', message: /clock/ })
  t.match(decideCrl(current, numbered2, ca.cert, early + 2000), { kind: 'load' }, 'small skew tolerated')
})

t.test('expiringIn', async (t) => {
  const crl = parseCrl(numbered)
  const next = crl.nextUpdate?.getTime() ?? 0
  t.equal(expiringIn(crl, next - 86_400_000), null, 'exactly a day left: not yet')
  t.equal(expiringIn(crl, next - 86_399_999), 86_399_999)
  t.equal(expiringIn(crl, next + 5), -5)
})
