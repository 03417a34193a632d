import t from 'tap'
import { spawnSync } from 'node:child_process'
import { readFile, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { initPki, issueBundle, readIndex } from '../../pki/toolkit.js'
import { withPkiLock } from '../../pki/lock.js'
import { pathExists } from '../../pki/atomic-write.js'
import { runCli } from './run-cli.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const dir = join(root, 'pki')
const lockPath = join(dir, '.lock')

t.before(() => initPki(dir))

t.test('two issue commands started together: both succeed or one fails clearly; the index stays valid', async (t) => {
  const runs = await Promise.all([
    runCli(['issue', 'node-x', '--role', 'node', '--dir', dir]),
    runCli(['issue', 'node-y', '--role', 'node', '--dir', dir]),
    runCli(['issue', 'node-z', '--role', 'node', '--dir', dir]),
    runCli(['issue', 'node-z', '--role', 'node', '--dir', dir]),
  ])
  const index = await readIndex(dir) // zod-validated: throws if the file were torn or interleaved
  const names = ['node-x', 'node-y', 'node-z', 'node-z']
  for (const [i, run] of runs.entries()) {
    if (run.code === 0) continue
    t.equal(run.code, 1, `${names[i]}: a refused run exits 1`)
    t.match(run.stderr, /^pxe-pki: error: (another pxe-pki command holds .*\.lock \(pid \d+\)|bundle .*node-z already exists)[^\n]*\n$/)
  }
  for (const name of ['node-x', 'node-y']) {
    const ok = runs[names.indexOf(name)]!.code === 0
    t.equal(index.certs.filter((c) => c.name === name).length, ok ? 1 : 0, `${name} recorded iff it succeeded`)
    t.equal(await pathExists(join(dir, 'bundles', name, 'cert.pem')), ok)
  }
  t.equal(index.certs.filter((c) => c.name === 'node-z').length, 1, 'the same name twice: exactly one bundle')
  t.ok(runs.slice(2).some((r) => r.code !== 0), 'the second node-z was refused')
  t.equal(await pathExists(lockPath), false, 'no lock left behind')
  t.equal(new Set(index.certs.map((c) => c.serial)).size, index.certs.length)
})

t.test('a lock held by a live process: the second run waits, then fails clearly without running', async (t) => {
  await writeFile(lockPath, `${process.pid}\n`)
  let ran = false
  await t.rejects(
    withPkiLock(dir, async () => (ran = true), 300),
    new RegExp(`another pxe-pki command holds ${lockPath.replaceAll('/', '\\/')} \\(pid ${process.pid}\\)`),
  )
  t.equal(ran, false)
  t.equal(await readFile(lockPath, 'utf8'), `${process.pid}\n`, "the holder's lock is untouched")
  await unlink(lockPath)
})

t.test('a stale lock of a dead process is taken over', async (t) => {
  const dead = spawnSync(process.execPath, ['-e', '']).pid
  t.ok(dead > 0)
  await writeFile(lockPath, `${dead}\n`)
  const { serial } = await issueBundle(dir, 'after-crash', 'node')
  t.ok((await readIndex(dir)).certs.some((c) => c.serial === serial))
  t.equal(await pathExists(lockPath), false)
})
