// The verdict cache of src/identity/principal.ts: a certificate's principal (or why it gives none) is
// kept by the SHA-256 of its DER, so reconnecting nodes are not parsed again; rotations get their own
// entry; the cache is bounded, oldest out first. (Revocation and validity are checked per request,
// over real TLS, in test/e2e/revocation-audit.test.ts and test/e2e/session-resumption.test.ts.)
import t from 'tap'
import { X509Certificate } from 'node:crypto'
import { join } from 'node:path'
import { VerdictCache, isPrincipal } from '../../src/identity/principal.js'
import { bundle, makePki, opensslCert } from '../e2e/harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const certOf = async (name: string) => new X509Certificate((await bundle(pki, name, 'node')).cert)
const a = await certOf('node-a')
const b = await certOf('node-b')
const c = await certOf('node-c')
const aRotated = await certOf('node-a') // the same name, a new certificate (bundle() replaces)
const admin = new X509Certificate(opensslCert(pki, join(root, 'openssl'), 'admin', '/CN=node-x/OU=admin', ['extendedKeyUsage=clientAuth', 'basicConstraints=CA:false']).cert)

t.test('a certificate is judged once: the same verdict for every connection that presents it', async (t) => {
  const cache = new VerdictCache()
  const first = cache.of(a)
  t.ok(isPrincipal(first) && first.name === 'node-a' && first.role === 'node')
  t.equal(cache.of(new X509Certificate(a.raw)), first, 'another object of the same certificate: the kept verdict')
  t.equal(cache.held, 1)
})

t.test('a refused certificate is kept as refused, with its reason', async (t) => {
  const cache = new VerdictCache()
  const verdict = cache.of(admin)
  t.notOk(isPrincipal(verdict))
  t.match(verdict, { reason: /unknown role OU="admin"/ })
  t.equal(cache.of(admin), verdict)
})

t.test('a rotated certificate of the same name is another entry, with its own serial and dates', async (t) => {
  const cache = new VerdictCache()
  const before = cache.of(a)
  const after = cache.of(aRotated)
  t.ok(isPrincipal(before) && isPrincipal(after))
  t.not(after, before)
  t.not(isPrincipal(after) && after.serial, isPrincipal(before) && before.serial, 'the new serial, so the CRL check applies to it')
})

t.test('bounded: beyond its size the oldest certificate is dropped and judged again when it returns', async (t) => {
  const cache = new VerdictCache(2)
  const first = cache.of(a)
  cache.of(b)
  cache.of(c)
  t.equal(cache.held, 2, 'never more than its size')
  t.equal(cache.of(c), cache.of(c), 'the newest are kept')
  const again = cache.of(a)
  t.not(again, first, 'the oldest was dropped')
  t.same(again, first, 'and judged again to the same verdict')
})

t.test('no certificate: refused, nothing kept', async (t) => {
  const cache = new VerdictCache()
  t.same(cache.of(undefined), { reason: 'no client certificate' })
  t.equal(cache.held, 0)
})
