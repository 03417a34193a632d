import { testDir } from '../support/test-dir.js'
/**
 * kill -9 at random points while a child process saves in a loop: the state file must always load,
 * and its counter must never be behind what the child reported as committed.
 * The child runs the real store code from the build (dist/, made by `npm test`): a fast start, no TS loader.
 */
import { spawn } from 'node:child_process'
import { randomInt } from 'node:crypto'
import { readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import t from 'tap'
import { z } from 'zod'
import { SnapshotFile } from '../../src/state/snapshot-file.js'

const KILLS = 20
const BUILT_STORE = fileURLToPath(new URL('../../dist/src/state/snapshot-file.js', import.meta.url))
const counterSchema = z.object({ counter: z.number().int().positive(), pad: z.string() }).strict()

const CHILD = `
import { SnapshotFile } from '${pathToFileURL(BUILT_STORE).href}'
const [stateDir] = process.argv.slice(2)
// a hand-written stand-in for the zod schema (zod takes longer to import than a save takes);
// the parent validates every file it loads with the real zod schema
const schema = {
  safeParse: (v) => (Number.isSafeInteger(v?.counter) && v.counter > 0 ? { success: true, data: v } : { success: false, error: { issues: [] } }),
}
const store = new SnapshotFile(stateDir, schema)
let counter = (await store.load())?.counter ?? 0
for (;;) {
  // three overlapping saves: the first is written, the next two coalesce into one write of the third
  const n = counter
  const saves = [1, 2, 3].map((k) =>
    store.save({ counter: n + k, pad: 'x'.repeat((n * k) % 4000) }).then(() => process.stdout.write(n + k + '\\n')),
  )
  await Promise.all(saves)
  counter += 3
}
`

/** Runs the child until it has committed at least once, waits a random moment, kills it with SIGKILL. */
function runAndKill(childPath: string, stateDir: string): Promise<number> {
  return new Promise((resolve, reject) => {
    // without tap's NODE_OPTIONS hooks: a plain node process starts fast
    const env = { ...process.env, NODE_OPTIONS: '' }
    const child = spawn(process.execPath, [childPath, stateDir], { stdio: ['ignore', 'pipe', 'pipe'], env })
    let lastCommitted = 0
    let buffered = ''
    let stderr = ''
    let killScheduled = false
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    child.stdout.on('data', (d: Buffer) => {
      buffered += d.toString()
      const lines = buffered.split('\n')
      buffered = lines.pop() ?? ''
      for (const l of lines) lastCommitted = Math.max(lastCommitted, Number(l))
      if (!killScheduled) {
        killScheduled = true
        setTimeout(() => child.kill('SIGKILL'), randomInt(0, 25))
      }
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL') resolve(lastCommitted)
      else reject(new Error(`child exited with ${code}: ${stderr}`))
    })
  })
}

t.test(`state survives ${KILLS} kill -9 during saves`, async (t) => {
  const codeDir = testDir(t)
  const childPath = join(codeDir, 'child.mjs')
  writeFileSync(childPath, CHILD)
  const stateDir = join(t.testdirName, 'state')

  let observed = 0
  let midWrite = 0
  for (let i = 0; i < KILLS; i++) {
    const committed = await runAndKill(childPath, stateDir)
    if (readdirSync(stateDir).some((n) => n.includes('.tmp-'))) midWrite++
    const loaded = await new SnapshotFile(stateDir, counterSchema).load()
    if (loaded === null || loaded.counter < Math.max(committed, observed)) {
      t.fail(`run ${i}: loaded ${loaded?.counter ?? 'nothing'}, committed ${committed}, seen before ${observed}`)
      return
    }
    observed = loaded.counter
  }
  t.comment(`${midWrite} of ${KILLS} kills left a temp file behind (landed mid-write)`)
  t.pass(`after ${KILLS} kills the state loads with counter ${observed}, never behind a commit`)
  const prev = await new SnapshotFile(stateDir, counterSchema, { fileName: 'state.json.prev' }).load()
  t.ok(prev !== null && prev.counter <= observed, 'the previous copy is a valid, older state')
})
