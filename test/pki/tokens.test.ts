// Bootstrap tokens on the CA host (SPEC "Device enrollment and renewal"): made with their secret in a 0600
// file, printed once, listed without secrets, revoked, spent only one use at a time; bad input changes nothing.
import t from 'tap'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { initPki } from '../../pki/toolkit.js'
import { createToken, findToken, listTokens, parseDuration, revokeToken, spendTokenUse, tokenAllowsName, tokenUnusable } from '../../pki/token-store.js'
import { PkiError, UsageError } from '../../pki/errors.js'
import { parseToken } from '../../src/core/enroll-token.js'
import { fingerprint, modeOf } from './helpers.js'

const root = await mkdtemp(join(tmpdir(), 'pki-tokens-'))
t.teardown(() => rm(root, { recursive: true, force: true }))
const dir = join(root, 'pki')
await initPki(dir)

t.test('create: printed once, kept 0600 with its secret, recorded in the index without it; list never shows it', async (t) => {
  const now = new Date('2026-12-07T10:00:00Z')
  const made = await createToken(dir, { names: 'rack7-*', uses: 3, ttlMs: parseDuration('2h', '--ttl'), approve: 'auto', certDays: 1, now })
  const token = parseToken(made.token)
  t.equal(token.id, made.entry.id)
  t.equal(await modeOf(join(dir, 'tokens.json')), 0o600)
  const stored = await findToken(dir, token.id)
  t.equal(stored!.secret, token.secret.toString('base64url'))
  t.equal(stored!.expires_at, '2026-12-07T12:00:00.000Z')
  t.equal(stored!.reenroll, 'manual', 're-enrollment is manual unless asked')
  const secret = token.secret.toString('base64url')
  const index = await readFile(join(dir, 'index.json'), 'utf8')
  t.match(index, `id=${token.id} names=rack7-* uses=3`)
  t.notMatch(index, secret, 'the index never holds the secret')
  const listed = await listTokens(dir, now)
  t.equal(listed.length, 1)
  t.equal(listed[0]!.status, 'active')
  t.notMatch(JSON.stringify(listed), secret)
  t.ok(tokenAllowsName(stored!, 'rack7-node-1'))
  t.notOk(tokenAllowsName(stored!, 'rack8-node-1'))
})

t.test('uses are spent one at a time, only while the token can enroll', async (t) => {
  const now = new Date()
  const { entry } = await createToken(dir, { names: '*', uses: 2 })
  t.equal((await spendTokenUse(dir, entry.id, 'a', now)).uses_left, 1)
  t.equal((await spendTokenUse(dir, entry.id, 'b', now)).uses_left, 0)
  await t.rejects(spendTokenUse(dir, entry.id, 'c', now), /has no use left \(of 2\)/)
  t.equal((await listTokens(dir)).find((x) => x.id === entry.id)!.status, 'used_up')
  const short = await createToken(dir, { names: '*', ttlMs: 60_000, now: new Date(Date.now() - 120_000) })
  await t.rejects(spendTokenUse(dir, short.entry.id, 'd'), /expired at/)
  t.equal((await listTokens(dir)).find((x) => x.id === short.entry.id)!.status, 'expired')
})

t.test('revoke: the token can no longer enroll; a second revoke and an unknown id are refused', async (t) => {
  const { entry } = await createToken(dir, { names: 'x-*', uses: 5 })
  const revoked = await revokeToken(dir, entry.id)
  t.equal(revoked.status, 'revoked')
  t.match(tokenUnusable((await findToken(dir, entry.id))!, new Date()), /was revoked at/)
  await t.rejects(spendTokenUse(dir, entry.id, 'x-1'), /was revoked/)
  const before = await fingerprint(dir)
  await t.rejects(revokeToken(dir, entry.id), PkiError)
  await t.rejects(revokeToken(dir, 'bbbbbbbbbb'), /no token bbbbbbbbbb/)
  await t.rejects(revokeToken(dir, 'NOT-AN-ID'), UsageError)
  t.same(await fingerprint(dir), before, 'refusals changed nothing')
})

t.test('bad options are refused before anything is written', async (t) => {
  const before = await fingerprint(dir)
  for (const [opts, message] of [
    [{ names: '' }, /name pattern must not be empty/],
    [{ names: '../x' }, /invalid --names/],
    [{ names: 'a?' }, /invalid --names/],
    [{ names: '*', uses: 0 }, /invalid --uses 0/],
    [{ names: '*', uses: 1.5 }, /invalid --uses/],
    [{ names: '*', certDays: 91 }, /from 1 to 90 days/],
    [{ names: '*', certDays: 0 }, /from 1 to 90 days/],
  ] as const) {
    await t.rejects(createToken(dir, opts), message)
  }
  for (const bad of ['10', '1w', '-1h', '0m', '30s', '400d', '1.5h', '']) t.throws(() => parseDuration(bad, '--ttl'), UsageError, bad)
  t.equal(parseDuration('90m', '--ttl'), 90 * 60_000)
  t.same(await fingerprint(dir), before)
})

t.test('a token file that is damaged stops the command without echoing it', async (t) => {
  const other = join(root, 'pki2')
  await initPki(other)
  const { writeFile } = await import('node:fs/promises')
  await writeFile(join(other, 'tokens.json'), JSON.stringify({ format: 'pxe-pki-tokens', version: 1, tokens: [{ id: 'aaaaaaaaaa', secret: 'SECRET-VALUE' }] }))
  const err = await listTokens(other).catch((e: Error) => e)
  t.type(err, PkiError)
  t.notMatch((err as Error).message, 'SECRET-VALUE')
})
