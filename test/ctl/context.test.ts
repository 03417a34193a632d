// pxe-ctl's context file: `context init` writes it (0600 in a 0700 folder, whole or not at all, never
// over an existing one without --force, only for a usable operator bundle), and every command reads it
// from --context, $PXE_CONTEXT or ~/.config/pxe-ctl/context.json, refusing a bad or group-readable one.
import t from 'tap'
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { issueBundle } from '../../pki/issue-certs.js'
import { runCtl, startFleet, writeContext } from './support.js'

const fleet = await startFleet(t)
const { root, url, operatorBundle, home } = fleet
const { bundleDir: nodeBundle } = await issueBundle(fleet.pki.dir, 'node-x', 'node', { outDir: join(root, 'node-bundles') })

t.test('context init writes the default file 0600 in a 0700 folder; status then works with no flag', async (t) => {
  const res = await runCtl(['context', 'init', '--controller', `${url},https://127.0.0.1:1`, '--bundle', operatorBundle], { home })
  t.equal(res.code, 0, res.stderr)
  const path = join(home, '.config', 'pxe-ctl', 'context.json')
  t.match(res.stdout, `wrote ${path} (mode 0600)`)
  t.match(res.stdout, 'operator alice')
  t.equal(statSync(path).mode & 0o777, 0o600)
  t.equal(statSync(join(home, '.config', 'pxe-ctl')).mode & 0o777, 0o700)
  t.same(JSON.parse(readFileSync(path, 'utf8')), { controllers: [url, 'https://127.0.0.1:1'], bundle: operatorBundle })
  t.same(readdirSync(join(home, '.config', 'pxe-ctl')), ['context.json'], 'no temp file left')
  t.notMatch(res.stdout + res.stderr, /PRIVATE KEY/)
  const status = await runCtl(['status'], { home })
  t.equal(status.code, 0, status.stderr)
  t.match(status.stdout, /^controller\s+https:\/\/127\.0\.0\.1:/)

  const again = await runCtl(['context', 'init', '--controller', 'https://127.0.0.1:2', '--bundle', operatorBundle], { home })
  t.equal(again.code, 1, 'refuses to overwrite')
  t.match(again.stderr, /already exists; pass --force to replace it/)
  t.same(JSON.parse(readFileSync(path, 'utf8')).controllers, [url, 'https://127.0.0.1:1'], 'unchanged')
  const forced = await runCtl(['context', 'init', '--controller', 'https://127.0.0.1:2', '--bundle', operatorBundle, '--force', '-o', 'json'], { home })
  t.equal(forced.code, 0, forced.stderr)
  t.same(JSON.parse(forced.stdout).controllers, ['https://127.0.0.1:2'])
  t.same(JSON.parse(readFileSync(path, 'utf8')).controllers, ['https://127.0.0.1:2'], 'replaced with --force')
  t.equal(statSync(path).mode & 0o777, 0o600)
})

t.test('context init refuses a bundle that is not a usable operator one, writing nothing', async (t) => {
  const target = join(root, 'refused', 'context.json')
  const cases: [string, string, RegExp][] = [
    ['a missing folder', join(root, 'nope'), /cannot read key\.pem \(ENOENT\)/],
    ['a node bundle', nodeBundle, /a node certificate of node-x, not an operator one/],
  ]
  const wrongKey = join(root, 'wrong-key')
  mkdirSync(wrongKey)
  writeFileSync(join(wrongKey, 'key.pem'), readFileSync(join(nodeBundle, 'key.pem')), { mode: 0o600 })
  writeFileSync(join(wrongKey, 'cert.pem'), readFileSync(join(operatorBundle, 'cert.pem')))
  writeFileSync(join(wrongKey, 'ca.pem'), readFileSync(join(operatorBundle, 'ca.pem')))
  cases.push(['a key of another certificate', wrongKey, /key\.pem does not belong to cert\.pem/])
  const openKey = join(root, 'open-key')
  mkdirSync(openKey)
  for (const f of ['key.pem', 'cert.pem', 'ca.pem']) writeFileSync(join(openKey, f), readFileSync(join(operatorBundle, f)))
  chmodSync(join(openKey, 'key.pem'), 0o644)
  cases.push(['a key readable by others', openKey, /key\.pem is accessible by group or others \(mode 0644\)/])
  for (const [what, dir, message] of cases) {
    const res = await runCtl(['--context', target, 'context', 'init', '--controller', url, '--bundle', dir], { home })
    t.equal(res.code, 1, what)
    t.match(res.stderr, message, what)
    t.notMatch(res.stderr, /PRIVATE KEY/, `${what}: no key material`)
    t.notOk(existsSync(target), `${what}: nothing written`)
  }
  const usage: [string, string[], RegExp][] = [
    ['no --controller', ['--bundle', operatorBundle], /--controller URL\[,URL\.\.\.\] is required/],
    ['plain http', ['--controller', 'http://127.0.0.1:8443', '--bundle', operatorBundle], /must use https/],
    ['a path', ['--controller', `${url}/v1`, '--bundle', operatorBundle], /without a path/],
    ['a URL twice', ['--controller', `${url},${url}`, '--bundle', operatorBundle], /listed twice/],
    ['no --bundle', ['--controller', url], /--bundle DIR is required/],
  ]
  for (const [what, args, message] of usage) {
    const res = await runCtl(['--context', target, 'context', 'init', ...args], { home })
    t.equal(res.code, 2, what)
    t.match(res.stderr, message, what)
    t.match(res.stderr, /usage: pxe-ctl context init --controller/, `${what}: the usage`)
    t.notOk(existsSync(target), `${what}: nothing written`)
  }
})

t.test('reading: $PXE_CONTEXT, a bundle relative to the file, and every bad file named with its key', async (t) => {
  const dir = join(root, 'ctx')
  mkdirSync(dir)
  const path = join(dir, 'mine.json')
  writeFileSync(path, JSON.stringify({ controllers: [url], bundle: relative(dir, operatorBundle) }), { mode: 0o600 })
  const viaEnv = await runCtl(['nodes'], { home, env: { PXE_CONTEXT: path } })
  t.equal(viaEnv.code, 0, viaEnv.stderr)
  t.match(viaEnv.stdout, /^(NODE|no live node)/)

  const bad: [string, unknown, RegExp][] = [
    ['an unknown key', { controllers: [url], bundle: operatorBundle, contorllers: [] }, /context file .*: unknown key "contorllers" \(allowed: controllers, bundle\)/],
    ['no controllers', { controllers: [], bundle: operatorBundle }, /"controllers" must list at least one controller URL/],
    ['a bad URL', { controllers: ['http://127.0.0.1:1'], bundle: operatorBundle }, /"controllers\.0" "http:\/\/127\.0\.0\.1:1" must use https/],
    ['no bundle', { controllers: [url] }, /"bundle"/],
    ['not JSON', '{"controllers":', /is not JSON/],
  ]
  for (const [what, content, message] of bad) {
    const file = join(dir, 'bad.json')
    writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content), { mode: 0o600 })
    const res = await runCtl(['--context', file, 'status'], { home })
    t.equal(res.code, 1, what)
    t.match(res.stderr, message, `${what}: ${res.stderr.trim()}`)
    t.match(res.stderr, file, `${what}: names the file`)
  }
  const open = join(dir, 'open.json')
  writeContext(open, [url], operatorBundle)
  chmodSync(open, 0o644)
  const refused = await runCtl(['--context', open, 'status'], { home })
  t.equal(refused.code, 1)
  t.match(refused.stderr, /is accessible by group or others \(mode 0644\); run chmod 600/)
  const missing = await runCtl(['status'], { home: join(root, 'empty-home') })
  t.equal(missing.code, 1)
  t.match(missing.stderr, /cannot read context file .*empty-home\/\.config\/pxe-ctl\/context\.json \(ENOENT\); create it with "pxe-ctl context init/)
})
