// Sealing of the session-ticket keys HA replicas share through etcd (src/server/ticket-key-seal.ts):
// only a holder of the plan-signing key opens a record, and a record changed in etcd does not open.
import t from 'tap'
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { inspect } from 'node:util'
import { TicketSealKey, type SealedTicketKeys } from '../../src/server/ticket-key-seal.js'

const plan = generateKeyPairSync('ed25519').privateKey
const seal = TicketSealKey.derive(plan, '/pxe/')
const keys = randomBytes(48)
const binding = { createdAt: 1_764_000_000_000, crlSha256: 'ab'.repeat(32) }
const record = seal.seal(keys, binding)

t.test('a sealed record opens with the same plan key and prefix, to the same keys and binding', async (t) => {
  const again = TicketSealKey.derive(plan, '/pxe/')
  t.equal(again.id, seal.id, 'the derivation is deterministic: every replica computes the same seal key')
  const opened = again.open(JSON.parse(JSON.stringify(record)))
  if (!('keys' in opened)) throw new Error(`did not open: ${opened.detail}`)
  t.ok(opened.keys.equals(keys))
  t.same(opened.binding, binding)
  t.not(seal.seal(keys, binding).nonce, record.nonce, 'a fresh nonce for every seal')
})

t.test('what an etcd reader sees: no key bytes, no seal key', async (t) => {
  const text = JSON.stringify(record)
  t.notOk(text.includes(keys.toString('base64')), 'the keys are not in the clear')
  t.notOk(text.includes(keys.subarray(0, 16).toString('hex')), 'not even the key name')
  t.notMatch(inspect(seal, { showHidden: true }), /Buffer|<Buffer/, 'inspect shows no key bytes')
  t.same(Object.keys(JSON.parse(JSON.stringify(seal))), ['id'], 'JSON shows only the seal id')
  t.match(record.seal_id, /^[0-9a-f]{32}$/)
})

t.test('another plan key or another prefix: told apart as another seal key', async (t) => {
  const otherPlan = TicketSealKey.derive(generateKeyPairSync('ed25519').privateKey, '/pxe/')
  t.match(otherPlan.open(record), { problem: 'other_seal_key' })
  const otherPrefix = TicketSealKey.derive(plan, '/pxe-staging/')
  t.not(otherPrefix.id, seal.id)
  t.match(otherPrefix.open(record), { problem: 'other_seal_key' })
  // A forger who copies the (public) seal id still cannot make a record that opens.
  const forged: SealedTicketKeys = { ...record, sealed: randomBytes(64).toString('base64') }
  t.match(seal.open(forged), { problem: 'tampered' })
})

t.test('a record changed in etcd does not open: the binding and the ciphertext are authenticated', async (t) => {
  const flip = (b64: string, i: number) => {
    const b = Buffer.from(b64, 'base64')
    b[i]! ^= 1
    return b.toString('base64')
  }
  const changes: [string, SealedTicketKeys][] = [
    ['made younger', { ...record, created_at: record.created_at + 86_400_000 }],
    ['moved to another CRL', { ...record, crl_sha256: 'cd'.repeat(32) }],
    ['a bit of the keys', { ...record, sealed: flip(record.sealed, 5) }],
    ['a bit of the tag', { ...record, sealed: flip(record.sealed, 60) }],
    ['another nonce', { ...record, nonce: flip(record.nonce, 0) }],
  ]
  for (const [what, changed] of changes) t.match(seal.open(changed), { problem: 'tampered' }, what)
})

t.test('anything that is not a record is refused by the schema, naming the field', async (t) => {
  const bad: [string, unknown, RegExp][] = [
    ['not an object', 'garbage', /\(record\)/],
    ['an unknown key', { ...record, keys: keys.toString('base64') }, /Unrecognized key/],
    ['another version', { ...record, v: 2 }, /^v:/],
    ['a short nonce', { ...record, nonce: 'AAAA' }, /^nonce:/],
    ['a short ciphertext', { ...record, sealed: Buffer.alloc(48).toString('base64') }, /^sealed:/],
    ['an upper-case fingerprint', { ...record, crl_sha256: 'AB'.repeat(32) }, /^crl_sha256:/],
    ['a negative time', { ...record, created_at: -1 }, /^created_at:/],
  ]
  for (const [what, raw, detail] of bad) {
    const opened = seal.open(raw)
    t.match(opened, { problem: 'malformed' }, what)
    t.match((opened as { detail: string }).detail, detail, what)
  }
})

t.test('only an Ed25519 plan key derives a seal key; only 48 key bytes are sealed', async (t) => {
  t.throws(() => TicketSealKey.derive(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey, '/pxe/'), TypeError)
  t.throws(() => seal.seal(randomBytes(32), binding), RangeError)
})
