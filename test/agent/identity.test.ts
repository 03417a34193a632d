// Bundles and in-memory identities, made at run time by our own toolkit.
import t from 'tap'
import { chmodSync, cpSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { issueBundle } from '../../pki/issue-certs.js'
import { IdentityError, identityFromPem, loadBundle, loadBundleJwks } from '../../src/agent/identity.js'
import { PinnedKeys } from '../../src/agent/pinned-keys.js'
import { makePki } from '../e2e/harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const foreign = await makePki(join(root, 'foreign'))
const out = join(root, 'bundles')
const good = (await issueBundle(pki.dir, 'compaq-01', 'node', { outDir: out })).bundleDir
const other = (await issueBundle(pki.dir, 'compaq-02', 'node', { outDir: out })).bundleDir
const operator = (await issueBundle(pki.dir, 'alice', 'operator', { outDir: out })).bundleDir
const alien = (await issueBundle(foreign.dir, 'compaq-03', 'node', { outDir: join(root, 'foreign-bundles') })).bundleDir
const expired = (await issueBundle(pki.dir, 'compaq-04', 'node', { outDir: out, notBefore: new Date(Date.now() - 3 * 86_400_000), days: 1 })).bundleDir
const read = (dir: string, file: string) => readFileSync(join(dir, file), 'utf8')
const material = (dir: string) => ({ cert: read(dir, 'cert.pem'), key: read(dir, 'key.pem'), ca: read(dir, 'ca.pem'), jwks: JSON.parse(read(dir, 'plan-jwks.json')) })

/** A copy of `dir` with one file replaced. */
function variant(dir: string, name: string, file: string, content: string): string {
  const copy = join(root, 'variants', name)
  cpSync(dir, copy, { recursive: true })
  writeFileSync(join(copy, file), content)
  return copy
}

t.test('a bundle from pxe-pki issue: the node ID is the CN, the JWKS is pinned', async (t) => {
  const id = await loadBundle(good)
  t.equal(id.nodeId, 'compaq-01')
  t.same(id.pinnedKeys.kids, JSON.parse(read(good, 'plan-jwks.json')).keys.map((k: { kid: string }) => k.kid))
  t.ok(id.notAfter > Date.now())
  t.equal((await loadBundleJwks(good)).kids.length, 1)
})

t.test('the same identity from PEM in memory, with pinned keys shared between agents', async (t) => {
  const shared = await PinnedKeys.fromJwks(JSON.parse(read(good, 'plan-jwks.json')))
  const id = await identityFromPem({ ...material(good), jwks: shared })
  t.equal(id.nodeId, 'compaq-01')
  t.equal(id.pinnedKeys, shared, 'the very same keys object')
})

t.test('every unusable bundle is refused with a reason, and no key material in it', async (t) => {
  const keyOfOther = variant(good, 'key-of-other', 'key.pem', read(other, 'key.pem'))
  const openKey = variant(good, 'open-key', 'key.pem', read(good, 'key.pem'))
  chmodSync(join(openKey, 'key.pem'), 0o644)
  const jwk = JSON.parse(read(good, 'plan-jwks.json')).keys[0]
  const cases: [string, string, RegExp][] = [
    ['missing folder', join(root, 'nope'), /cannot read .*key\.pem \(ENOENT\)/],
    ['key readable by others', openKey, /accessible by group or others \(mode 0644\); run chmod 600/],
    ['an operator bundle', operator, /is for role "operator", not node/],
    ['a certificate from another CA', variant(alien, 'alien', 'ca.pem', pki.ca), /was not issued by the bundle's CA/],
    ["another node's key", keyOfOther, /the private key does not belong to the certificate of compaq-01/],
    ['an expired certificate', expired, /expired at/],
    ['plan-jwks.json not JSON', variant(good, 'jwks-text', 'plan-jwks.json', 'keys'), /plan-jwks\.json is not JSON/],
    ['a kid that is not the thumbprint', variant(good, 'jwks-kid', 'plan-jwks.json', JSON.stringify({ keys: [{ ...jwk, kid: 'made-up' }] })), /not its RFC 7638 thumbprint/],
    ['a non-Ed25519 key', variant(good, 'jwks-ec', 'plan-jwks.json', JSON.stringify({ keys: [{ ...jwk, crv: 'P-256' }] })), /not a plan JWKS/],
    ['an empty JWKS', variant(good, 'jwks-empty', 'plan-jwks.json', JSON.stringify({ keys: [] })), /not a plan JWKS/],
    ['a certificate that is not PEM', variant(good, 'cert-text', 'cert.pem', 'hello'), /not a PEM certificate/],
  ]
  for (const [what, dir, message] of cases) {
    const error = await loadBundle(dir).catch((err: unknown) => err)
    t.ok(error instanceof IdentityError, `${what}: refused`)
    t.match((error as Error).message, message, `${what}: ${(error as Error).message}`)
    t.notMatch((error as Error).message, /BEGIN/, `${what}: no PEM in the message`)
  }
})
