import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import type { Test } from 'tap'
import { SnapshotFile } from '../../src/state/snapshot-file.js'
import { StateFileError } from '../../src/state/state-file-error.js'
import { encodeStateFile } from '../../src/state/state-file-format.js'
import { stateAt, testStateSchema } from './fixtures/test-state.js'
import type { TestState } from './fixtures/test-state.js'
import { testDir } from '../support/test-dir.js'

const store = (dir: string, fileName?: string): SnapshotFile<TestState> =>
  new SnapshotFile(dir, testStateSchema, fileName === undefined ? {} : { fileName })

t.test('round trip, modes, and no state on a first start', async (t) => {
  const dir = join(testDir(t), 'state')
  t.equal(await store(dir).load(), null, 'missing directory: first start')
  const s = store(dir)
  await s.save(stateAt(3))
  t.equal(statSync(dir).mode & 0o777, 0o700)
  t.equal(statSync(join(dir, 'state.json')).mode & 0o777, 0o600)
  t.same(await store(dir).load(), stateAt(3))
  t.same(readdirSync(dir), ['state.json'], 'no temp file and no .prev after the first save')
  await s.close()
  await t.rejects(s.save(stateAt(4)), /closed/)
})

t.test('the previous good copy is kept beside the file', async (t) => {
  const dir = testDir(t)
  const s = store(dir)
  await s.save(stateAt(1))
  await s.save(stateAt(2))
  t.same(await store(dir).load(), stateAt(2))
  t.same(await store(dir, 'state.json.prev').load(), stateAt(1))
  t.equal(statSync(join(dir, 'state.json.prev')).mode & 0o777, 0o600)
  await s.save(stateAt(3))
  t.same(await store(dir, 'state.json.prev').load(), stateAt(2))
})

t.test('a value the schema refuses is not saved', async (t) => {
  const dir = testDir(t)
  const s = store(dir)
  await s.save(stateAt(1))
  const bad = { ...stateAt(2), extra: true } as unknown as TestState
  await t.rejects(s.save(bad), /does not match its schema/)
  t.same(await store(dir).load(), stateAt(1))
})

/** Loads a damaged file and checks the error and that the file was left byte-identical. */
async function expectDamaged(t: Test, dir: string, damaged: Buffer, problem: RegExp): Promise<void> {
  const path = join(dir, 'state.json')
  writeFileSync(path, damaged)
  const s = store(dir)
  const err = await s.load().then(
    () => null,
    (e: unknown) => e,
  )
  t.type(err, StateFileError)
  const e = err as StateFileError
  t.match(e.message, problem)
  t.ok(e.message.includes(path) && e.message.includes(`${path}.prev`), 'names the file and the previous copy')
  await t.rejects(s.save(stateAt(99)), StateFileError, 'a store that failed to load will not replace the file')
  await t.rejects(store(dir).save(stateAt(99)), StateFileError, 'nor will a fresh store')
  t.ok(readFileSync(path).equals(damaged), 'the damaged file is byte-identical')
}

t.test('a truncated file stops the load with a clear message', async (t) => {
  const dir = testDir(t)
  await store(dir).save(stateAt(1))
  await store(dir).save(stateAt(2))
  const good = readFileSync(join(dir, 'state.json'))
  await expectDamaged(t, dir, good.subarray(0, good.length - 20), /state\.json is unusable: .*(truncated|not valid JSON)/)
  t.match(
    await store(dir).load().catch((e: Error) => e.message),
    /The previous good copy is at .*state\.json\.prev/,
  )
})

t.test('any single flipped bit is detected', async (t) => {
  const dir = testDir(t)
  const good = Buffer.from(encodeStateFile(stateAt(5)))
  const path = join(dir, 'state.json')
  let detected = 0
  for (let i = 0; i < good.length; i++) {
    const damaged = Buffer.from(good)
    damaged[i] = damaged[i]! ^ (1 << i % 8)
    writeFileSync(path, damaged)
    const err = await store(dir).load().then(() => null, (e: unknown) => e)
    if (err instanceof StateFileError && readFileSync(path).equals(damaged)) detected++
    else t.fail(`flip at byte ${i} not detected`)
  }
  t.equal(detected, good.length)
  t.match(await store(dir).load().catch((e: Error) => e.message), /There is no previous copy/)
})

t.test('a flipped byte in the body is a checksum mismatch; the file stays as it was', async (t) => {
  const dir = testDir(t)
  await store(dir).save(stateAt(1))
  const good = readFileSync(join(dir, 'state.json'))
  const at = good.indexOf('"generation":1') + '"generation":'.length
  const damaged = Buffer.from(good)
  damaged[at] = '7'.charCodeAt(0)
  await expectDamaged(t, dir, damaged, /checksum mismatch/)
})

t.test('other unusable files', async (t) => {
  const dir = testDir(t)
  await expectDamaged(t, dir, Buffer.from('{"format":"x"}\n'), /not a pxe-controller-state file/)
  await expectDamaged(t, dir, Buffer.from(encodeStateFile({ generation: -1, nodes: [] })), /does not match the state schema: generation/)
  const asDir = testDir(t, { 'state.json': {} })
  await t.rejects(store(asDir).load(), { name: 'StateFileError', message: /cannot be read \(EISDIR\)/ })
})

t.test('a missing file beside its previous copy stops the load; nothing is written', async (t) => {
  const dir = testDir(t)
  const s = store(dir)
  await s.save(stateAt(1))
  await s.save(stateAt(2))
  await s.close()
  rmSync(join(dir, 'state.json'))
  const prev = readFileSync(join(dir, 'state.json.prev'))
  await t.rejects(store(dir).load(), { name: 'StateFileError', message: /is missing, but its previous copy exists.*previous good copy is at .*state\.json\.prev/ })
  await t.rejects(store(dir).save(stateAt(0)), StateFileError, 'a fresh store will not start over at generation 0 either')
  t.same(readdirSync(dir), ['state.json.prev'])
  t.same(readFileSync(join(dir, 'state.json.prev')), prev, 'the previous copy is untouched')
})

t.test('leftover temp files are ignored, then cleaned up', async (t) => {
  const dir = testDir(t)
  await store(dir).save(stateAt(1))
  writeFileSync(join(dir, 'state.json.tmp-0123456789abcdef'), '{"format":"pxe-contr')
  writeFileSync(join(dir, 'state.json.prev.tmp-0123456789abcdef'), 'junk')
  t.same(await store(dir).load(), stateAt(1))
  await store(dir).save(stateAt(2))
  t.same(readdirSync(dir).sort(), ['state.json', 'state.json.prev'])
})

t.test('concurrent saves leave a valid file with the last value', async (t) => {
  const dir = testDir(t)
  const s = store(dir)
  const values = Array.from({ length: 25 }, (_, i) => stateAt(i + 1))
  await Promise.all(values.map((v) => s.save(v)))
  t.same(await store(dir).load(), stateAt(25))
  const later = stateAt(26)
  const saving = s.save(later)
  later.generation = 1000 // a mutation after save() must not leak in
  await saving
  t.same(await store(dir).load(), stateAt(26))
  t.same(readdirSync(dir).sort(), ['state.json', 'state.json.prev'])
})

t.test('a file name with a slash is refused', async (t) => {
  mkdirSync(join(testDir(t), 'x'))
  t.throws(() => store(t.testdirName, 'a/b'), TypeError)
})
