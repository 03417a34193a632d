// The bins run the compiled JavaScript and never compile first (npm ci builds once through `prepare`):
// without dist/ each says so in one line instead of a stack trace; with it, it runs. `npm run pki` runs
// the build as it is, too.
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { testDir } from './support/test-dir.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string>; scripts: Record<string, string> }
const run = (file: string, args: string[]) => spawnSync(process.execPath, [file, ...args], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, NODE_OPTIONS: '' } })

t.test('npm run pki does not compile first, and goes through the bin (one line without dist/)', async (t) => {
  t.equal(pkg.scripts.pki, `node ${pkg.bin['pxe-pki']}`)
  t.equal(pkg.scripts.prepare, 'npm run build', 'npm ci builds dist/ once')
})

t.test('without dist/ every bin prints one line naming the fix', async (t) => {
  const dir = testDir(t, {})
  mkdirSync(join(dir, 'bin'))
  for (const file of [...Object.values(pkg.bin), 'bin/run-built.js']) copyFileSync(join(ROOT, file), join(dir, 'bin', basename(file)))
  for (const [name, file] of Object.entries(pkg.bin)) {
    const res = run(join(dir, 'bin', basename(file)), ['--help'])
    t.equal(res.status, 1, `${name}: exit 1`)
    t.equal(res.stdout, '', `${name}: nothing on stdout`)
    t.match(res.stderr, new RegExp(`^${name}: \\S+/dist/\\S+\\.js is missing: run npm run build \\(or npm ci\\) in \\S+ first\\n$`), `${name}: one line`)
  }
})

t.test('with dist/ every bin runs the build', { skip: existsSync(join(ROOT, 'dist', 'src', 'main.js')) ? false : 'dist/ is missing: run npm run build' }, async (t) => {
  for (const [name, file] of Object.entries(pkg.bin)) {
    const res = run(join(ROOT, file), ['--help'])
    t.equal(res.status, 0, `${name} --help: exit 0`)
    t.match(res.stdout, /usage/i, `${name} --help prints its usage`)
  }
})
