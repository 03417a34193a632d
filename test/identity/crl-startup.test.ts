import t from 'tap'
import { parseCrl } from '../../src/identity/crl.js'
import { assertNotRolledBack, loadInitialCrl, startupCrlWarning } from '../../src/identity/crl-startup.js'
import { genCrl, makeCa, tempDir } from './crl-openssl.js'

const dir = tempDir(t)
const ca = makeCa(dir, 'startup', 'ec')
const foreign = makeCa(dir, 'foreign', 'ec')
genCrl(ca) // number 1
const two = parseCrl(genCrl(ca)) // number 2
const unnumbered = parseCrl(genCrl(ca, { v1: true }))

t.test('the starting CRL is compared with the number recorded in the state', async (t) => {
  t.doesNotThrow(() => assertNotRolledBack(two, undefined, 'crl.pem'), 'nothing recorded (first start, or an older state file)')
  t.doesNotThrow(() => assertNotRolledBack(two, '2', 'crl.pem'), 'the same number: the CRL in force before the restart')
  t.doesNotThrow(() => assertNotRolledBack(two, '1', 'crl.pem'), 'a newer one')
  t.doesNotThrow(() => assertNotRolledBack(unnumbered, undefined, 'crl.pem'), 'unnumbered CRLs only: nothing to compare')
  t.throws(() => assertNotRolledBack(two, '3', '/etc/pxe/crl.pem'), { message: /\/etc\/pxe\/crl\.pem is CRL number 2, older than CRL number 3 .*undo/ })
  t.throws(() => assertNotRolledBack(unnumbered, '2', 'crl.pem'), { message: /crl\.pem has no CRL number, but CRL number 2 was in force/ })
  const huge = (2n ** 159n).toString()
  t.throws(() => assertNotRolledBack(two, huge, 'crl.pem'), { message: new RegExp(`older than CRL number ${huge} `) }, 'compared exactly, as big integers')
})

t.test('a CRL that is not from the CA stops the start, naming the key', async (t) => {
  t.throws(() => loadInitialCrl(genCrl(foreign), ca.cert, 'crl.pem'), { message: /key "tls\.crl": crl\.pem is not a CRL signed by the configured CA/ })
})

t.test('a start on a CRL OpenSSL cannot use now is warned about', async (t) => {
  const at = two.thisUpdate.getTime()
  t.equal(startupCrlWarning(two, at), null)
  t.match(startupCrlWarning(two, at - 1000), /thisUpdate .* is in the future: OpenSSL refuses every client until then/)
  t.match(startupCrlWarning(two, (two.nextUpdate as Date).getTime()), /nextUpdate .* has passed/)
})
