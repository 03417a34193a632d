import { testDir } from '../support/test-dir.js'
/**
 * kill -9 at random points while a child process writes deltas through the real journaled store (from
 * dist/, built by npm test): the store must always load, and its generation must never be behind what
 * the child reported as durable. Compaction is made frequent so kills land in it too.
 */
import { spawn } from 'node:child_process'
import { randomInt } from 'node:crypto'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { JournaledFileStore } from '../../src/state/journaled-file-store.js'

const KILLS = 15
const STORE = fileURLToPath(new URL('../../dist/src/state/journaled-file-store.js', import.meta.url))
const APPLY = fileURLToPath(new URL('../../dist/src/state/apply-delta.js', import.meta.url))

const CHILD = `
import { JournaledFileStore } from ${JSON.stringify(STORE)}
import { applyDeltas } from ${JSON.stringify(APPLY)}
const [dir] = process.argv.slice(2)
const store = new JournaledFileStore(dir, { minCompactBytes: 4096 })
const fp = '0'.repeat(64)
let state = (await store.load()) ?? { version: 2, meta: { generation: 0, totalShards: 64, maxConcurrency: 16, planFingerprint: fp, reshard: null, crlNumber: null }, nodes: [], draining: [], handoffs: [], dailyGrants: [] }
for (;;) {
  const generation = state.meta.generation + 1
  const id = 'n' + (generation % 50)
  const delta = { meta: { ...state.meta, generation }, putNodes: [{ nodeId: id, capacity: 8, reportedGeneration: generation, certSerial: 'ab', certNotBefore: 0, readyShards: 0, startingShards: 0, backoffShards: 0, fatalShards: 0 }], deleteNodes: [], putDraining: [], deleteDraining: [], putHandoffs: [], deleteHandoffs: [], addGrants: [], dropGrantsBefore: null }
  state = applyDeltas(state, [delta])
  const full = state
  await store.write(delta, () => full)
  process.stdout.write(generation + '\\n')
}
`

t.test(`kill -9 during journal appends and compactions (${KILLS} kills)`, async (t) => {
  t.ok(existsSync(STORE), 'dist/ is built (npm test builds first)')
  const root = testDir(t)
  const child = join(root, 'child.mjs')
  writeFileSync(child, CHILD)
  const dir = join(root, 'state')
  let durable = 0
  for (let kill = 0; kill < KILLS; kill++) {
    const proc = spawn(process.execPath, [child, dir], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    proc.stdout.on('data', (d: Buffer) => (out += d.toString()))
    proc.stderr.on('data', (d: Buffer) => (err += d.toString()))
    // Wait for the first durable write of this run, then kill at a random moment.
    await new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (out.includes('\n') || proc.exitCode !== null) {
          clearInterval(check)
          resolve()
        }
      }, 5)
    })
    await new Promise((r) => setTimeout(r, randomInt(5, 120)))
    proc.kill('SIGKILL')
    await new Promise((r) => proc.once('exit', r))
    t.equal(err, '', `run ${kill}: the child never failed`)
    const acked = out.trim().split('\n').map(Number).filter((n) => n > 0)
    durable = Math.max(durable, ...acked)
    const loaded = await new JournaledFileStore(dir).load()
    t.ok(loaded !== null && loaded.meta.generation >= durable, `run ${kill}: loads at generation ${loaded?.meta.generation} >= ${durable} acknowledged`)
    if (loaded === null || loaded.meta.generation < durable) break
  }
})
