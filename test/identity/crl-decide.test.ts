import t from 'tap'
import { crlTimeState, decideCrl, decideParsedCrl, expiringIn } from '../../src/identity/crl-decide.js'
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

t.test('a thisUpdate in the future, by any amount, waits as pending (OpenSSL has no tolerance)', async (t) => {
  const current = parseCrl(numbered)
  const thisUpdate = parseCrl(numbered2).thisUpdate.getTime()
  t.match(decideCrl(current, numbered2, ca.cert, thisUpdate - 1000), { kind: 'pending', crl: { crlNumber: 2n } })
  t.match(decideCrl(current, numbered2, ca.cert, thisUpdate - 1), { kind: 'pending' }, 'one millisecond early')
  t.match(decideCrl(current, numbered2, ca.cert, thisUpdate), { kind: 'load' }, 'valid from thisUpdate itself, as in OpenSSL')
  t.match(decideCrl(parseCrl(numbered2), numbered, ca.cert, 0), { kind: 'refuse', reason: 'older_crl' }, 'an older CRL is refused, not held')
})

t.test('past nextUpdate: refused while the CRL in force is valid, installed when it is past its own too', async (t) => {
  const day = 86_400_000
  const stale1 = parseCrl(genCrl(ca, { lastUpdate: new Date(now - 3 * day), nextUpdate: new Date(now - 2 * day) }))
  const stale2 = parseCrl(genCrl(ca, { lastUpdate: new Date(now - 2 * day), nextUpdate: new Date(now - day) }))
  const fresh = parseCrl(genCrl(ca))
  t.equal(crlTimeState(stale2, now), 'expired')
  t.equal(crlTimeState(stale2, (stale2.nextUpdate as Date).getTime()), 'expired', 'nextUpdate itself is past, as in OpenSSL')
  t.equal(crlTimeState(stale2, (stale2.nextUpdate as Date).getTime() - 1), 'valid')
  t.match(decideParsedCrl(parseCrl(numbered2), stale2, now), { kind: 'refuse', reason: 'expired_crl', message: /pxe-pki crl/ })
  t.match(decideParsedCrl(stale1, stale2, now), { kind: 'load' }, 'both past nextUpdate: the newer revocations win')
  // fresh was signed after `now` was read (by OpenSSL's clock, in whole seconds): judge it at its own thisUpdate.
  t.match(decideParsedCrl(stale1, fresh, Math.max(now, fresh.thisUpdate.getTime())), { kind: 'load' })
  const backwards = parseCrl(genCrl(ca, { lastUpdate: new Date(now), nextUpdate: new Date(now - 1000) }))
  t.match(decideParsedCrl(fresh, backwards, now + 10 * day), { kind: 'refuse', reason: 'malformed', message: /never valid/ })
})

t.test('expiringIn', async (t) => {
  const crl = parseCrl(numbered)
  const next = crl.nextUpdate?.getTime() ?? 0
  t.equal(expiringIn(crl, next - 86_400_000), null, 'exactly a day left: not yet')
  t.equal(expiringIn(crl, next - 86_399_999), 86_399_999)
  t.equal(expiringIn(crl, next + 5), -5)
})
