// The HA replicas' shared session-ticket keys (src/server/shared-ticket-keys.ts) against an in-memory
// record store with etcd's compare-and-put semantics (test/ha/ticket-keys-takeover.test.ts runs them on a
// real etcd): a good record wins everywhere, only the leader writes, a bad record is never used.
import t from 'tap'
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import pino from 'pino'
import { Writable } from 'node:stream'
import { SharedTicketKeys, type StoredTicketKeys, type TicketKeyStoreAccess } from '../../src/server/shared-ticket-keys.js'
import { crlFingerprint } from '../../src/server/ticket-key-file.js'
import { TicketSealKey } from '../../src/server/ticket-key-seal.js'

const plan = generateKeyPairSync('ed25519').privateKey
const seal = TicketSealKey.derive(plan, '/pxe/')
const CRL_1 = '-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n'
const CRL_2 = '-----BEGIN X509 CRL-----\nBBBB\n-----END X509 CRL-----\n'
/** One etcd key: put only over the mod revision read; watchers told of every change. */
class MemoryStore {
  value: string | null = null
  revision = 0
  writes = 0
  private readonly watchers = new Set<() => void>()
  async read(): Promise<StoredTicketKeys | null> {
    return this.value === null ? null : { raw: JSON.parse(this.value) as unknown, modRevision: String(this.revision) }
  }
  async write(record: object, expected: string | null): Promise<'committed' | 'refused'> {
    if ((expected ?? '0') !== (this.value === null ? '0' : String(this.revision))) return 'refused'
    this.put(JSON.stringify(record))
    this.writes += 1
    return 'committed'
  }
  put(value: string): void {
    this.value = value
    this.revision += 1
    for (const w of this.watchers) w()
  }
  watch(onChange: () => void) {
    this.watchers.add(onChange)
    return { cancel: async () => void this.watchers.delete(onChange) }
  }
}

function logs() {
  const lines: Record<string, unknown>[] = []
  const logger = pino({ level: 'info' }, new Writable({ write: (chunk: Buffer, _e, cb) => (lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>), cb()) }))
  return { logger, lines }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20))

async function replica(store: MemoryStore, leading: { on: boolean }, extra: { crlPem?: string; now?: () => number; maxAgeMs?: number; seal?: TicketSealKey } = {}) {
  const { logger, lines } = logs()
  const installed: Buffer[] = []
  // As the HA backend does: only a leader's write is tried.
  const access: TicketKeyStoreAccess = {
    read: () => store.read(),
    write: async (record, expected) => (leading.on ? store.write(record, expected) : 'not_leading'),
    watch: (onChange) => store.watch(onChange),
  }
  const keys = await SharedTicketKeys.open({ store: access, seal: extra.seal ?? seal, crlPem: extra.crlPem ?? CRL_1, logger, checkIntervalMs: 60_000, ...(extra.now ? { now: extra.now } : {}), ...(extra.maxAgeMs ? { maxAgeMs: extra.maxAgeMs } : {}) })
  keys.startTimer((k) => void installed.push(k))
  await settle()
  return { keys, installed, lines, close: () => keys.close() }
}

t.test('the leader publishes its keys sealed; a follower adopts them; only the leader writes', async (t) => {
  const store = new MemoryStore()
  const follower = await replica(store, { on: false })
  t.teardown(follower.close)
  t.equal(store.value, null, 'a follower writes nothing')
  const leader = await replica(store, { on: true })
  t.teardown(leader.close)
  t.equal(store.writes, 1, 'the leader published')
  t.notOk(store.value!.includes(leader.keys.current.toString('base64')), 'sealed: the keys are not in the record')
  await settle()
  t.ok(follower.keys.current.equals(leader.keys.current), 'the follower took the keys through the watch')
  t.ok(follower.installed.at(-1)?.equals(leader.keys.current), 'and installed them on its TLS server')
  const later = await replica(store, { on: false })
  t.teardown(later.close)
  t.ok(later.keys.current.equals(leader.keys.current), 'a replica started later opens with them')
  t.equal(store.writes, 1, 'nobody wrote again')
})

t.test('a record that does not open, of other plan keys, of another CRL or too old is not used', async (t) => {
  const store = new MemoryStore()
  const ownKeys = randomBytes(48)
  const now = Date.now()
  const cases: [string, string, RegExp | null][] = [
    ['tampered', JSON.stringify({ ...seal.seal(ownKeys, { createdAt: now, crlSha256: crlFingerprint(CRL_1) }), created_at: now + 1 }), /tampered/],
    ['other plan keys', JSON.stringify(TicketSealKey.derive(generateKeyPairSync('ed25519').privateKey, '/pxe/').seal(ownKeys, { createdAt: now, crlSha256: crlFingerprint(CRL_1) })), /other_seal_key/],
    ['garbage', JSON.stringify({ keys: ownKeys.toString('base64') }), /malformed/],
    ['another CRL', JSON.stringify(seal.seal(ownKeys, { createdAt: now, crlSha256: crlFingerprint(CRL_2) })), null],
    ['older than the maximum age', JSON.stringify(seal.seal(ownKeys, { createdAt: now - 86_400_001, crlSha256: crlFingerprint(CRL_1) })), null],
    ['dated in the future', JSON.stringify(seal.seal(ownKeys, { createdAt: now + 3_600_000, crlSha256: crlFingerprint(CRL_1) })), /future/],
  ]
  for (const [what, value, logged] of cases) {
    store.put(value)
    const r = await replica(store, { on: false })
    t.notOk(r.keys.current.equals(ownKeys), `${what}: not adopted`)
    const warning = r.lines.find((l) => l.msg === 'TLS session-ticket key record in etcd not used')
    if (logged === null) t.notOk(warning, `${what}: not an error, nothing logged`)
    else t.match(warning?.problem, logged, `${what}: logged with the reason`)
    // a plain substring: base64 holds '+' and '/', which as a RegExp failed now and then ("Nothing to repeat")
    t.notOk(JSON.stringify(r.lines).includes(ownKeys.toString('base64').slice(0, 16)), `${what}: no key bytes in the log`)
    await r.close()
  }
  // The leader replaces a record it cannot use with its own.
  store.put(cases[0]![1])
  const leader = await replica(store, { on: true })
  t.teardown(leader.close)
  const opened = seal.open(JSON.parse(store.value!))
  t.ok('keys' in opened && opened.keys.equals(leader.keys.current), 'the leader put its own keys over the tampered record')
})

t.test('a CRL change: fresh keys at once on every replica, then the leader\'s record of the new CRL everywhere', async (t) => {
  const store = new MemoryStore()
  const leading = { on: true }
  const leader = await replica(store, leading)
  t.teardown(leader.close)
  const follower = await replica(store, { on: false })
  t.teardown(follower.close)
  const before = leader.keys.current
  t.ok(follower.keys.current.equals(before))

  // The follower learns of the new CRL first: it draws its own keys at once and waits for the leader's.
  follower.keys.rotate('crl_changed', (k) => void follower.installed.push(k), CRL_2)
  await settle()
  t.notOk(follower.keys.current.equals(before), 'no session from before the CRL change resumes on the follower')
  t.equal(store.writes, 1, 'the follower did not write')
  leader.keys.rotate('crl_changed', (k) => void leader.installed.push(k), CRL_2)
  await settle()
  t.equal(store.writes, 2, 'the leader published keys of the new CRL')
  t.notOk(leader.keys.current.equals(before))
  t.ok(follower.keys.current.equals(leader.keys.current), 'the follower adopted them')
})

t.test('a leader whose compare-and-put lost looks again and takes the record that won', async (t) => {
  const store = new MemoryStore()
  const a = await replica(store, { on: true })
  t.teardown(a.close)
  // Another leader's keys land in between (a term ended and another began).
  const other = randomBytes(48)
  store.put(JSON.stringify(seal.seal(other, { createdAt: Date.now(), crlSha256: crlFingerprint(CRL_1) })))
  await settle()
  t.ok(a.keys.current.equals(other), 'a good record always wins')
  t.equal(store.writes, 1)
})

t.test('a refused write is not retried at once: a stale fence would spin until the leadership noticed', async (t) => {
  let writes = 0
  const access: TicketKeyStoreAccess = {
    read: async () => null,
    write: async () => (writes++, 'refused'),
    watch: () => ({ cancel: async () => undefined }),
  }
  const keys = await SharedTicketKeys.open({ store: access, seal, crlPem: CRL_1, checkIntervalMs: 60_000 })
  t.teardown(() => keys.close())
  keys.startTimer(() => undefined)
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.equal(writes, 1, 'one write per check; the next comes with the watch or the periodic re-read')
  await keys.close()
  await keys.close() // a second close (the two closers of an HA stop) waits for the same
})
