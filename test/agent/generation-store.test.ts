// The state file: atomic, 0600, validated when read back, bound to one node.
import t from 'tap'
import { chmodSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { FileGenerationStore, StateFileError } from '../../src/agent/generation-store.js'
import { testDir } from '../support/test-dir.js'

t.test('missing file: no generation yet; save then load round-trips; 0600 in a new 0700 folder; no temp file left', async (t) => {
  const dir = join(testDir(t), 'state')
  const path = join(dir, 'state.json')
  const store = new FileGenerationStore(path, 'node-a')
  t.equal(await store.load(), null)
  await store.save(7)
  await store.save(9)
  t.equal(await new FileGenerationStore(path, 'node-a').load(), 9, 'a new process reads it back')
  t.equal(statSync(path).mode & 0o777, 0o600)
  t.equal(statSync(dir).mode & 0o777, 0o700)
  t.same(readdirSync(dir), ['state.json'], 'only the file itself')
  const content = JSON.parse(readFileSync(path, 'utf8'))
  t.same(Object.keys(content).sort(), ['generation', 'node_id', 'saved_at', 'version'])
})

t.test('a file that is not ours is refused with a clear error, and left as it is', async (t) => {
  const dir = testDir(t)
  const cases: [string, string, RegExp][] = [
    ['not JSON', '{"version":1,', /is not JSON/],
    ['a string generation', JSON.stringify({ version: 1, node_id: 'node-a', generation: '9', saved_at: new Date().toISOString() }), /generation/],
    ['a negative generation', JSON.stringify({ version: 1, node_id: 'node-a', generation: -1, saved_at: new Date().toISOString() }), /generation/],
    ['an unknown key', JSON.stringify({ version: 1, node_id: 'node-a', generation: 9, saved_at: new Date().toISOString(), extra: 1 }), /not a node state file/],
    ['another version', JSON.stringify({ version: 2, node_id: 'node-a', generation: 9, saved_at: new Date().toISOString() }), /version/],
    ['another node', JSON.stringify({ version: 1, node_id: 'node-b', generation: 9, saved_at: new Date().toISOString() }), /belongs to node node-b, not node-a/],
  ]
  for (const [what, text, message] of cases) {
    const path = join(dir, `${what.replace(/ /g, '-')}.json`)
    writeFileSync(path, text)
    const error = await new FileGenerationStore(path, 'node-a').load().catch((err: unknown) => err)
    t.ok(error instanceof StateFileError, `${what}: refused`)
    t.match((error as Error).message, message, `${what}: ${(error as Error).message}`)
    t.equal(readFileSync(path, 'utf8'), text, `${what}: untouched`)
  }
})

t.test('an unreadable file is an error, not "no generation"', async (t) => {
  if (process.getuid?.() === 0) {
    // root reads through any mode: use a folder where a file is expected instead
    const path = testDir(t, { 'state.json': {} })
    await t.rejects(new FileGenerationStore(join(path, 'state.json'), 'node-a').load(), /cannot read state file .*\(EISDIR\)/)
    return
  }
  const path = join(testDir(t), 'state.json')
  writeFileSync(path, '{}')
  chmodSync(path, 0)
  await t.rejects(new FileGenerationStore(path, 'node-a').load(), /cannot read state file/)
})
