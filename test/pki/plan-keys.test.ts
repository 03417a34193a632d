import t from 'tap'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { calculateJwkThumbprint, CompactSign, compactVerify, createLocalJWKSet, importJWK } from 'jose'
import { initPki, issueServerCert, issueBundle, rotatePlanKey, exportController, readIndex, planKeysFileSchema } from '../../pki/toolkit.js'
import type { PlanKeysFile } from '../../pki/toolkit.js'
import { fingerprint, modeOf } from './helpers.js'
import { runCli } from './run-cli.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const dir = join(root, 'pki')

t.before(() => initPki(dir))

const readJson = async (path: string): Promise<unknown> => JSON.parse(await readFile(path, 'utf8'))
const planKeys = async (): Promise<PlanKeysFile> => planKeysFileSchema.parse(await readJson(join(dir, 'plan-keys.json')))

/** Signs with the current private key and verifies against a published JWKS, as nodes will. */
async function signsUnder(file: PlanKeysFile, jwks: unknown): Promise<boolean> {
  const current = file.keys.find((k) => k.kid === file.current)!
  const jws = await new CompactSign(new TextEncoder().encode('plan'))
    .setProtectedHeader({ alg: 'EdDSA', typ: 'pxe-plan+jwt', kid: current.kid })
    .sign(await importJWK(current, 'EdDSA'))
  const { payload } = await compactVerify(jws, createLocalJWKSet(jwks as Parameters<typeof createLocalJWKSet>[0]))
  return new TextDecoder().decode(payload) === 'plan'
}

t.test('init makes one Ed25519 plan key; kid is the RFC 7638 thumbprint; the JWKS has no private part', async (t) => {
  const file = await planKeys()
  t.equal(file.keys.length, 1)
  const key = file.keys[0]!
  t.match(key, { kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig', kid: file.current })
  t.equal(key.kid, await calculateJwkThumbprint({ kty: 'OKP', crv: 'Ed25519', x: key.x }, 'sha256'))
  const jwks = await readJson(join(dir, 'plan-jwks.json'))
  t.same(jwks, { keys: [{ kty: 'OKP', crv: 'Ed25519', x: key.x, kid: key.kid, alg: 'EdDSA', use: 'sig' }] })
  t.ok(await signsUnder(file, jwks))
  t.equal(await modeOf(join(dir, 'plan-keys.json')), 0o600)
})

t.test('rotate: a new current key, the previous one stays published, the one before goes', async (t) => {
  const first = (await planKeys()).current
  const { kid: second } = await rotatePlanKey(dir)
  let file = await planKeys()
  t.same(file.keys.map((k) => k.kid), [second, first])
  t.equal(file.current, second)
  const jwks = (await readJson(join(dir, 'plan-jwks.json'))) as { keys: Array<Record<string, unknown>> }
  t.same(jwks.keys.map((k) => k.kid), [second, first])
  t.ok(jwks.keys.every((k) => !('d' in k)))
  t.ok(await signsUnder(file, jwks))
  const { bundleDir } = await issueBundle(dir, 'node-1', 'node')
  t.same(await readJson(join(bundleDir, 'plan-jwks.json')), jwks, 'bundles ship both public keys')

  const { kid: third } = await rotatePlanKey(dir)
  file = await planKeys()
  t.same(file.keys.map((k) => k.kid), [third, second])
  t.equal(new Set([first, second, third]).size, 3)
  t.equal((await readIndex(dir)).history.filter((h) => h.command === 'plan-key rotate').length, 2)
})

t.test('export-controller: needs a server certificate, writes exactly five files, never the CA key', async (t) => {
  const target = join(root, 'controller')
  const before = await fingerprint(dir)
  await t.rejects(exportController(dir, target), /no server certificate yet; run "pxe-pki server-cert/)
  t.same(await fingerprint(dir), before)
  await t.rejects(readdir(target), { code: 'ENOENT' }, 'nothing created')

  await issueServerCert(dir, { dns: ['localhost'], ip: ['127.0.0.1'] })
  const res = await runCli(['export-controller', target, '--dir', dir])
  t.equal(res.code, 0, res.stderr)
  t.notMatch(res.stdout, /PRIVATE KEY/)
  t.same((await readdir(target)).sort(), ['ca.pem', 'crl.pem', 'plan-keys.json', 'server-key.pem', 'server.pem'])
  for (const f of await readdir(target)) t.equal(await readFile(join(target, f), 'utf8'), await readFile(join(dir, f), 'utf8'), f)
  t.equal(await modeOf(target), 0o700)
  t.equal(await modeOf(join(target, 'server-key.pem')), 0o600)
  t.equal(await modeOf(join(target, 'plan-keys.json')), 0o600)
  t.equal(await modeOf(join(target, 'ca.pem')), 0o644)

  const exported = await fingerprint(target)
  await t.rejects(exportController(dir, target), /already exists; export-controller refuses to overwrite it \(use --force\)/)
  await rotatePlanKey(dir)
  t.same(await fingerprint(target), exported, 'a refused export changes nothing')
  const written = await exportController(dir, target, { force: true })
  t.equal(written.length, 5)
  t.equal(await readFile(join(target, 'plan-keys.json'), 'utf8'), await readFile(join(dir, 'plan-keys.json'), 'utf8'))
})

t.test('a plan-keys.json whose public x does not match its private d is refused and changes nothing', async (t) => {
  const file = await planKeys()
  const other = (await import('../../pki/plan-keys.js')).newPlanKey
  const foreign = await other()
  const current = file.keys.find((k) => k.kid === file.current)!
  // Same kid and x (so the thumbprint still matches), private part of another key.
  const damaged = { ...file, keys: file.keys.map((k) => (k === current ? { ...k, d: foreign.d } : k)) }
  const { writeFile } = await import('node:fs/promises')
  const original = await readFile(join(dir, 'plan-keys.json'), 'utf8')
  await writeFile(join(dir, 'plan-keys.json'), `${JSON.stringify(damaged, null, 2)}\n`, { mode: 0o600 })
  t.teardown(() => writeFile(join(dir, 'plan-keys.json'), original, { mode: 0o600 }))
  const before = await fingerprint(dir)
  const message = new RegExp(`plan-keys\\.json: key ${current.kid}: its public "x" is not the public key of its private "d"`)
  await t.rejects(rotatePlanKey(dir), message, 'plan-key rotate refuses')
  await t.rejects(exportController(dir, join(root, 'controller-damaged'), { force: true }), message, 'export-controller refuses')
  t.same(await fingerprint(dir), before, 'PKI unchanged')
  const res = await runCli(['export-controller', join(root, 'controller-damaged'), '--dir', dir])
  t.equal(res.code, 1)
  t.match(res.stderr, /^pxe-pki: error: .*its public "x" is not the public key of its private "d"/)
})
