// Issue 9 item 9: `issue --out DIR` never changes the mode of a folder it did not create.
import t from 'tap'
import { chmod, mkdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { initPki, issueBundle } from '../../pki/toolkit.js'
import { modeOf } from './helpers.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const dir = join(root, 'pki')

t.before(() => initPki(dir))

/** Mode bits including setuid/setgid/sticky (modeOf keeps only the permission bits). */
const fullMode = async (path: string): Promise<number> => (await stat(path)).mode & 0o7777

t.test('an existing 1777 or 0755 --out folder keeps its mode (sticky bit included); the bundle is 0700', async (t) => {
  for (const [label, mode] of [['shared-tmp', 0o1777], ['public', 0o755]] as const) {
    const out = join(root, label)
    await mkdir(out)
    await chmod(out, mode) // chmod, not mkdir's mode: the umask would narrow it
    t.equal(await fullMode(out), mode, `${label}: set up`)
    const { bundleDir } = await issueBundle(dir, `node-${label}`, 'node', { outDir: out })
    t.equal(await fullMode(out), mode, `${label}: mode unchanged after issue`)
    t.equal(await modeOf(bundleDir), 0o700, `${label}: the bundle folder the toolkit made is 0700`)
    t.equal(await modeOf(join(bundleDir, 'key.pem')), 0o600)
  }
})

t.test('folders the toolkit creates for --out (parents included) are 0700', async (t) => {
  const out = join(root, 'made', 'by', 'pxe-pki')
  const { bundleDir } = await issueBundle(dir, 'node-deep', 'node', { outDir: out })
  for (const d of [join(root, 'made'), join(root, 'made', 'by'), out, bundleDir]) t.equal(await fullMode(d), 0o700, d)
  t.equal(await fullMode(root), (await stat(root)).mode & 0o7777, 'the existing test folder is left alone')
})

t.test('init keeps the mode of an existing empty folder, and refuses one that others may write to', async (t) => {
  const shared = join(root, 'shared-pki')
  await mkdir(shared)
  await chmod(shared, 0o1777)
  await t.rejects(initPki(shared), /shared-pki is writable by group or others \(mode 1777\); use a new directory or "chmod 700" this one/)
  t.equal(await fullMode(shared), 0o1777, 'mode unchanged')
  const { readdir } = await import('node:fs/promises')
  t.same(await readdir(shared), [], 'nothing written')
  const open = join(root, 'readable-pki')
  await mkdir(open)
  await chmod(open, 0o755)
  await initPki(open)
  t.equal(await fullMode(open), 0o755, 'an existing 0755 folder keeps its mode')
  t.equal(await modeOf(join(open, 'ca-key.pem')), 0o600)
  t.equal(await fullMode(join(open, 'bundles')), 0o700, 'the bundles folder init made is 0700')
})
