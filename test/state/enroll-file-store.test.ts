// The enrollment queue's store in the state directory: a snapshot and a journal of changes, as the state's own
// store; a write costs what it changes; a torn last line is ignored; other damage stops the load, changing nothing.
import t from 'tap'
import { appendFileSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { EnrollFileStore, ENROLL_FILE, ENROLL_JOURNAL } from '../../src/state/enroll-file-store.js'
import { StateFileError } from '../../src/state/state-file-error.js'
import type { StoredEnroll } from '../../src/core/enroll-record.js'
import { testDir } from '../support/test-dir.js'

function record(n: number, over: Partial<StoredEnroll> = {}): StoredEnroll {
  return {
    v: 1, id: `r${String(n).padStart(21, '0')}`, kind: 'enroll', name: `node-${n}`, csr: '-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n',
    fingerprint: 'a'.repeat(64), token_id: 'aaaaaaaaaa', proof_sealed: 'sealed', source: '10.0.0.1', presenting_serial: null, created_at: n,
    status: 'pending', certificate: null, reason: null, decided_at: null, decided_by: null, rule: null, ...over,
  }
}

t.test('writes go to the journal, a restart reads snapshot and journal back', async (t) => {
  const dir = testDir(t)
  const store = new EnrollFileStore(dir)
  t.same(await store.load(), [], 'a first start: empty')
  await store.write([record(1)], []) // the first write is a snapshot
  const snapshotSize = statSync(join(dir, ENROLL_FILE)).size
  await store.write([record(2)], [])
  await store.write([record(1, { status: 'issued', certificate: 'PEM', decided_at: 5 })], [])
  await store.write([], [record(2).id])
  t.equal(statSync(join(dir, ENROLL_FILE)).size, snapshotSize, 'the snapshot was not rewritten')
  t.equal(readFileSync(join(dir, ENROLL_JOURNAL), 'utf8').trim().split('\n').length, 3, 'three journal lines')
  t.equal(statSync(join(dir, ENROLL_JOURNAL)).mode & 0o777, 0o600)
  const again = await new EnrollFileStore(dir).load()
  t.same(again.map((r) => [r.id, r.status]), [[record(1).id, 'issued']])
})

t.test('the journal is compacted into the snapshot once it outgrows it', async (t) => {
  const dir = testDir(t)
  const store = new EnrollFileStore(dir, { minCompactBytes: 2000 })
  await store.load()
  for (let i = 0; i < 30; i++) await store.write([record(i)], [])
  t.ok(statSync(join(dir, ENROLL_JOURNAL)).size < 4000, 'the journal started over')
  t.equal((await new EnrollFileStore(dir).load()).length, 30)
})

t.test('a torn last line is ignored (and cut before the next append); a damaged line stops the load, changing nothing', async (t) => {
  const dir = testDir(t)
  const store = new EnrollFileStore(dir)
  await store.load()
  await store.write([record(1)], [])
  await store.write([record(2)], [])
  appendFileSync(join(dir, ENROLL_JOURNAL), '{"seq":2,"sha256":"ab') // a crash mid-append
  const next = new EnrollFileStore(dir)
  t.equal((await next.load()).length, 2)
  await next.write([record(3)], [])
  t.equal((await new EnrollFileStore(dir).load()).length, 3, 'the torn tail was cut, the new line reads')
  const journal = readFileSync(join(dir, ENROLL_JOURNAL), 'utf8')
  const edited = journal.replace('node-3', 'node-9')
  writeFileSync(join(dir, ENROLL_JOURNAL), edited)
  await t.rejects(new EnrollFileStore(dir).load(), StateFileError)
  t.equal(readFileSync(join(dir, ENROLL_JOURNAL), 'utf8'), edited, 'the damaged journal is left as it is')
})
