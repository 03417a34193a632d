import { appendFileSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { AuditLog } from '../../src/audit/audit-log.js'
import { AUDIT_EVENTS } from '../../src/audit/audit-events.js'
import { hashLine, verifyAuditText } from '../../src/audit/chain.js'
import { verifyAuditFile } from '../../src/audit/verify-file.js'
import { testDir } from '../support/test-dir.js'

const T0 = Date.parse('2030-01-02T03:04:05.678Z')
const linesOf = (path: string): string[] => readFileSync(path, 'utf8').split('\n').slice(0, -1)
const parse = (line: string): Record<string, unknown> => JSON.parse(line) as Record<string, unknown>

/** A real log: every event kind, twice, written by AuditLog on a fake clock. */
async function writeRealLog(path: string): Promise<number> {
  let now = T0
  const log = await AuditLog.open(path, { now: () => now })
  for (const round of [1, 2]) {
    for (const event of AUDIT_EVENTS) {
      log.record(event, { round, node: 'node-a', peer: '127.0.0.1', operator: 'alice' })
      now += 1000
    }
  }
  await log.close()
  return AUDIT_EVENTS.length * 2
}

t.test('a real log verifies, with the documented line shape and mode 0600', async (t) => {
  const path = join(testDir(t), 'audit.log')
  const n = await writeRealLog(path)
  t.same(await verifyAuditFile(path), { ok: true, lines: n, lastHash: hashLine(linesOf(path)[n - 1]!) })
  t.equal(statSync(path).mode & 0o777, 0o600)
  const lines = linesOf(path)
  t.same(Object.keys(parse(lines[0]!)).slice(0, 5), ['level', 'time', 'seq', 'prev', 'event'])
  t.match(parse(lines[0]!), { level: 30, time: '2030-01-02T03:04:05.678Z', seq: 1, event: 'tls_rejected', node: 'node-a' })
  t.equal(parse(lines[1]!).time, '2030-01-02T03:04:06.678Z')
  t.notOk('pid' in parse(lines[0]!) || 'hostname' in parse(lines[0]!), 'no pid/hostname noise')
  t.same(new Set(lines.map((l) => parse(l).event)), new Set(AUDIT_EVENTS))
})

t.test('reopening continues seq and prev', async (t) => {
  const path = join(testDir(t), 'audit.log')
  const n = await writeRealLog(path)
  const before = readFileSync(path)
  const log = await AuditLog.open(path)
  t.equal(log.lastSeq, n)
  log.record('controller_start', { version: '1' })
  log.record('controller_stop', {})
  await log.close()
  const lines = linesOf(path)
  t.ok(readFileSync(path).subarray(0, before.length).equals(before), 'history untouched')
  t.match(parse(lines[n]!), { seq: n + 1, prev: hashLine(lines[n - 1]!), event: 'controller_start' })
  t.same(await verifyAuditFile(path), { ok: true, lines: n + 2, lastHash: hashLine(lines[n + 1]!) })
  t.notOk(lines.slice(n).some((l) => parse(l).event === 'audit_chain_resumed'), 'a clean reopen records nothing')
})

t.test('tampered copies of a real log fail on the expected line', async (t) => {
  const dir = testDir(t)
  const path = join(dir, 'audit.log')
  const n = await writeRealLog(path)
  const original = readFileSync(path)
  const lines = linesOf(path)
  const join1 = (ls: string[]): string => ls.map((l) => `${l}\n`).join('')
  const edited = [...lines]
  edited[9] = edited[9]!.replace('"operator":"alice"', '"operator":"mallory"')
  const cases: Array<[string, string, number]> = [
    ['deleted line 10', join1([...lines.slice(0, 9), ...lines.slice(10)]), 10],
    ['edited line 10', join1(edited), 11],
    ['swapped lines 10 and 11', join1([...lines.slice(0, 9), lines[10]!, lines[9]!, ...lines.slice(11)]), 10],
    ['torn last line', join1(lines.slice(0, -1)) + lines[n - 1]!.slice(0, 30), n],
  ]
  for (const [name, content, line] of cases) {
    const copy = join(dir, `${name.replace(/ /g, '-')}.log`)
    writeFileSync(copy, content)
    t.match(await verifyAuditFile(copy), { ok: false, line }, name)
  }
  t.ok(readFileSync(path).equals(original), 'the real log was only read')
})

t.test('private-key-like fields are redacted and reserved names kept aside', async (t) => {
  const path = join(testDir(t), 'audit.log')
  const log = await AuditLog.open(path)
  log.record('identity_rotated', {
    key: 'SECRET-1',
    privateKey: 'SECRET-2',
    jwk: { kty: 'OKP', d: 'SECRET-3', x: 'public' },
    seq: 99,
    event: 'forged',
  })
  await log.close()
  const text = readFileSync(path, 'utf8')
  t.notMatch(text, /SECRET/)
  t.match(parse(linesOf(path)[0]!), { seq: 1, event: 'identity_rotated', field_seq: 99, field_event: 'forged', jwk: { x: 'public' } })
  t.same(verifyAuditText(text).ok, true)
})

t.test('a torn last write is sealed, kept, and the chain resumes after it', async (t) => {
  const path = join(testDir(t), 'audit.log')
  const n = await writeRealLog(path)
  appendFileSync(path, '{"level":30,"time":"2030-01')
  const before = readFileSync(path)
  const log = await AuditLog.open(path)
  log.record('controller_start', {})
  await log.close()
  const lines = linesOf(path)
  t.ok(readFileSync(path).subarray(0, before.length).equals(before), 'the fragment is kept as evidence')
  t.equal(lines[n], '{"level":30,"time":"2030-01')
  t.match(parse(lines[n + 1]!), { event: 'audit_chain_resumed', torn_last_write: true, seq: n + 2, prev: hashLine(lines[n]!) })
  t.match(parse(lines[n + 2]!), { event: 'controller_start', seq: n + 3, prev: hashLine(lines[n + 1]!) })
  t.match(await verifyAuditFile(path), { ok: false, line: n + 1, reason: /not valid JSON/ })
  t.same(verifyAuditText(lines.slice(n + 1).join('\n') + '\n').ok, false, 'resumed lines do not pose as a fresh log')
})

t.test('a log whose last line does not chain is continued and the break recorded', async (t) => {
  const path = join(testDir(t), 'audit.log')
  const n = await writeRealLog(path)
  const lines = linesOf(path)
  const last = parse(lines[n - 1]!)
  last.prev = 'a'.repeat(64)
  writeFileSync(path, [...lines.slice(0, -1), JSON.stringify(last)].map((l) => `${l}\n`).join(''))
  const log = await AuditLog.open(path)
  log.record('controller_start', {})
  await log.close()
  const after = linesOf(path)
  t.match(parse(after[n]!), { event: 'audit_chain_resumed', torn_last_write: false, problem: /does not chain/, seq: n + 1 })
  t.match(await verifyAuditFile(path), { ok: false, line: n })
})

t.test('continues from the tail of a log larger than one tail read', async (t) => {
  const path = join(testDir(t), 'audit.log')
  const log = await AuditLog.open(path)
  const big = 'x'.repeat(100 * 1024) // lines longer than the first 64 KiB tail read
  for (let i = 0; i < 4; i++) log.record('crl_loaded', { note: big })
  await log.close()
  const again = await AuditLog.open(path)
  t.equal(again.lastSeq, 4)
  again.record('controller_start', {})
  await again.close()
  t.match(await verifyAuditFile(path), { ok: true, lines: 5 })
  t.notMatch(readFileSync(path, 'utf8'), /audit_chain_resumed/)
})

t.test('record after close throws; close twice is harmless', async (t) => {
  const path = join(testDir(t), 'audit.log')
  const log = await AuditLog.open(path)
  await log.close()
  await log.close()
  t.throws(() => log.record('controller_stop', {}), /closed/)
})
