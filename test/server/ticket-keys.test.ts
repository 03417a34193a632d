// The ticket-key file: kept 0600 in a 0700 folder, written atomically, validated when read back, never
// trusted when stale (other CRL, too old, dated ahead) or exposed (mode, link), and never logged.
import t from 'tap'
import { chmodSync, existsSync, lstatSync, readdirSync, readFileSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { ticketKeyPath, TICKET_KEY_FILE } from '../../src/server/ticket-key-file.js'
import { TicketKeys, TICKET_KEY_MAX_AGE_MS, type TicketKeysOptions } from '../../src/server/ticket-keys.js'
import { testDir } from '../support/test-dir.js'
import { decodeStateFile, encodeStateFile } from '../../src/state/state-file-format.js'

const CRL_A = '-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n'
const CRL_B = '-----BEGIN X509 CRL-----\nBBBB\n-----END X509 CRL-----\n'
const HOUR = 3_600_000

/** Every log line written by the code under test, as text (checked for key material at the end). */
const logText: string[] = []
const logger = pino({ level: 'debug' }, new Writable({
  write(chunk: Buffer, _enc, done) {
    logText.push(chunk.toString())
    done()
  },
}))
/** Every key the tests saw: none may appear in any log line, in any encoding. */
const seenKeys: Buffer[] = []

let clock = Date.parse('2030-01-01T00:00:00Z')
const now = () => clock

async function open(dir: string, extra: Partial<TicketKeysOptions> = {}): Promise<TicketKeys> {
  const keys = await TicketKeys.open(dir, { crlPem: CRL_A, logger, now, ...extra })
  seenKeys.push(keys.current)
  return keys
}

function body(dir: string): Record<string, unknown> {
  const decoded = decodeStateFile(readFileSync(ticketKeyPath(dir)))
  if ('problem' in decoded) throw new Error(decoded.problem)
  return decoded.body as Record<string, unknown>
}

t.test('first start: new keys saved 0600 in a 0700 folder; the next start gets the same keys', async (t) => {
  const base = testDir(t)
  const dir = join(base, 'state')
  const first = await open(dir)
  t.equal(first.current.length, 48)
  t.equal(statSync(dir).mode & 0o777, 0o700)
  t.equal(statSync(ticketKeyPath(dir)).mode & 0o777, 0o600)
  t.match(body(dir), { kind: 'tls-ticket-keys', created_at: new Date(clock).toISOString(), crl_sha256: /^[0-9a-f]{64}$/ })
  const second = await open(dir)
  t.ok(second.current.equals(first.current), 'the saved keys are used again')
  t.same(readdirSync(dir), [TICKET_KEY_FILE], 'one file, no previous copy and no temp file left')
})

t.test('saved keys are not used when stale', async (t) => {
  const base = testDir(t)
  const cases: Array<[string, Partial<TicketKeysOptions>, number]> = [
    ['another CRL is in force', { crlPem: CRL_B }, 0],
    ['they reached the maximum age', {}, TICKET_KEY_MAX_AGE_MS],
    ['they are dated two minutes ahead (clock set back)', {}, -2 * 60_000],
  ]
  for (const [why, opts, later] of cases) {
    const dir = join(base, why.replace(/\W+/g, '-'))
    const first = await open(dir)
    clock += later
    const second = await open(dir, opts)
    clock -= later
    t.notOk(second.current.equals(first.current), `${why}: new keys`)
    t.equal(body(dir).keys, second.current.toString('base64'), `${why}: the new keys replaced the file`)
  }
  const dir = join(base, 'young')
  const first = await open(dir)
  clock += TICKET_KEY_MAX_AGE_MS - HOUR
  t.ok((await open(dir)).current.equals(first.current), 'an hour short of the maximum age: still used')
  clock -= TICKET_KEY_MAX_AGE_MS - HOUR
})

t.test('a damaged, edited or exposed file is not used, and is replaced by a good one', async (t) => {
  const base = testDir(t)
  const good = (dir: string) => body(dir)
  const cases: Array<[string, (dir: string) => void]> = [
    ['truncated', (dir) => writeFileSync(ticketKeyPath(dir), readFileSync(ticketKeyPath(dir)).subarray(0, 40))],
    ['a flipped bit (checksum)', (dir) => {
      const bytes = readFileSync(ticketKeyPath(dir))
      bytes[bytes.length - 10]! ^= 1
      writeFileSync(ticketKeyPath(dir), bytes)
    }],
    ['an unknown field', (dir) => writeFileSync(ticketKeyPath(dir), encodeStateFile({ ...good(dir), extra: 1 }))],
    ['keys of the wrong length', (dir) => writeFileSync(ticketKeyPath(dir), encodeStateFile({ ...good(dir), keys: Buffer.alloc(32).toString('base64') }))],
    ['not a date', (dir) => writeFileSync(ticketKeyPath(dir), encodeStateFile({ ...good(dir), created_at: 'yesterday' }))],
    ['group-readable', (dir) => chmodSync(ticketKeyPath(dir), 0o640)],
    ['world-writable', (dir) => chmodSync(ticketKeyPath(dir), 0o602)],
  ]
  for (const [why, damage] of cases) {
    const dir = join(base, why.replace(/\W+/g, '-'))
    const first = await open(dir)
    damage(dir)
    const before = logText.length
    const second = await open(dir)
    t.notOk(second.current.equals(first.current), `${why}: new keys`)
    t.equal(statSync(ticketKeyPath(dir)).mode & 0o777, 0o600, `${why}: the file is 0600 again`)
    t.equal(body(dir).keys, second.current.toString('base64'), `${why}: and holds the new keys`)
    t.match(logText.slice(before).join(''), /key file not used/, `${why}: a warning says so`)
  }
})

t.test('a symbolic link is not followed: its target is neither read nor written', async (t) => {
  const base = testDir(t)
  const dir = join(base, 'state')
  const first = await open(dir)
  const elsewhere = join(base, 'elsewhere.json')
  const saved = readFileSync(ticketKeyPath(dir))
  writeFileSync(elsewhere, saved, { mode: 0o600 })
  unlinkSync(ticketKeyPath(dir))
  symlinkSync(elsewhere, ticketKeyPath(dir))
  const second = await open(dir)
  t.notOk(second.current.equals(first.current), 'the keys behind the link are not used')
  t.equal(lstatSync(ticketKeyPath(dir)).isFile(), true, 'the link was replaced by a file')
  t.ok(readFileSync(elsewhere).equals(saved), 'the target is untouched')
})

t.test('a rotation installs, then saves; an install that throws changes nothing', async (t) => {
  const base = testDir(t)
  const dir = join(base, 'state')
  const keys = await open(dir)
  const original = keys.current
  const fileBefore = readFileSync(ticketKeyPath(dir))
  t.throws(() => keys.rotate('crl_changed', () => { throw new Error('OpenSSL refused the context') }, CRL_B), /OpenSSL refused/)
  t.ok(keys.current.equals(original), 'the keys in force did not change')
  await keys.close()
  t.ok(readFileSync(ticketKeyPath(dir)).equals(fileBefore), 'nor did the file')

  const installed: Buffer[] = []
  const again = await open(dir)
  clock += HOUR
  again.rotate('crl_changed', (k) => installed.push(k), CRL_B)
  seenKeys.push(again.current)
  t.equal(installed.length, 1)
  t.ok(installed[0]!.equals(again.current), 'the installed keys are the keys in force')
  await again.close()
  t.ok((await open(dir, { crlPem: CRL_B })).current.equals(installed[0]!), 'saved with the new CRL: a restart keeps them')
  t.notOk((await open(dir, { crlPem: CRL_A })).current.equals(installed[0]!), 'under the old CRL they are not used')
  clock -= HOUR
})

t.test('the timer rotates keys that reach the maximum age, and saves them', async (t) => {
  const base = testDir(t)
  const dir = join(base, 'state')
  const realClock = () => Date.now()
  const keys = await TicketKeys.open(dir, { crlPem: CRL_A, logger, now: realClock, maxAgeMs: 300 })
  seenKeys.push(keys.current)
  const installed: Buffer[] = []
  keys.startTimer((k) => installed.push(k))
  for (let i = 0; i < 100 && installed.length < 2; i++) await new Promise((r) => setTimeout(r, 50))
  await keys.close()
  seenKeys.push(...installed)
  t.ok(installed.length >= 2, `rotated again and again (${installed.length} times)`)
  t.ok(keys.current.equals(installed.at(-1)!), 'the last installed keys are in force')
  t.equal(body(dir).keys, keys.current.toString('base64'), 'and saved')
  const count = installed.length
  await new Promise((r) => setTimeout(r, 400))
  t.equal(installed.length, count, 'no rotation after close()')
})

t.test('restored keys are rotated when the rest of their age is used up, not a full period later', async (t) => {
  const base = testDir(t)
  const dir = join(base, 'state')
  const wall = Date.now()
  const first = await TicketKeys.open(dir, { crlPem: CRL_A, logger, now: () => wall, maxAgeMs: 60_000 })
  seenKeys.push(first.current)
  await first.close()
  // The next start comes 59.7 s later (by the wall clock): 300 ms of the 60 s are left.
  const restored = await TicketKeys.open(dir, { crlPem: CRL_A, logger, now: () => wall + 59_700, maxAgeMs: 60_000 })
  t.ok(restored.current.equals(first.current), 'restored')
  const installed: Buffer[] = []
  restored.startTimer((k) => installed.push(k))
  for (let i = 0; i < 100 && installed.length === 0; i++) await new Promise((r) => setTimeout(r, 50))
  await restored.close()
  seenKeys.push(...installed)
  t.equal(installed.length, 1, 'rotated once, within seconds')
})

t.test('a start removes temp files an interrupted write left (they hold keys)', async (t) => {
  const base = testDir(t)
  const dir = join(base, 'state')
  await open(dir)
  const leftover = `${ticketKeyPath(dir)}.tmp-0123456789abcdef`
  writeFileSync(leftover, 'partial', { mode: 0o600 })
  await open(dir)
  t.notOk(existsSync(leftover))
})

t.test('HA (no folder to write): keys are drawn per process, rotate, and no write is attempted', async (t) => {
  const linesBefore = logText.length
  const first = await TicketKeys.open(null, { crlPem: CRL_A, logger, now })
  const second = await TicketKeys.open(null, { crlPem: CRL_A, logger, now })
  seenKeys.push(first.current, second.current)
  t.equal(first.current.length, 48)
  t.notSame(first.current, second.current, 'each process draws its own keys')
  let installed: Buffer | null = null
  first.rotate('crl_changed', (keys) => void (installed = keys), CRL_B)
  seenKeys.push(first.current)
  t.same(installed, first.current, 'a rotation installs new keys')
  await first.close()
  await second.close()
  const logged = logText.slice(linesBefore).join('')
  t.match(logged, /drawn for this process only/, 'the log says the keys are not saved')
  t.notMatch(logged, /could not be saved/, 'no save was attempted (it would fail without a folder and log it)')
})

t.test('no key ever appears in the log, in any encoding', async (t) => {
  t.ok(logText.length > 10, `the tests above logged (${logText.length} lines)`)
  t.ok(seenKeys.length > 20, `keys checked: ${seenKeys.length}`)
  const all = logText.join('')
  const leaks: string[] = []
  for (const [i, key] of seenKeys.entries()) {
    for (const encoding of ['base64', 'base64url', 'hex'] as const) {
      // The whole key, and its AES part alone (the 16 bytes that decrypt tickets).
      if (all.includes(key.toString(encoding))) leaks.push(`key ${i} as ${encoding}`)
      if (all.includes(key.subarray(32).toString(encoding))) leaks.push(`key ${i}'s AES part as ${encoding}`)
    }
  }
  t.same(leaks, [])
})
