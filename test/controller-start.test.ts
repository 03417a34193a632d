// What pxe-controller prints as it starts (src/main.ts): a start that fails on its config prints that
// error and nothing else (no log line before it, not even the V8 tuning one); a good start logs the V8
// tuning once the config loaded and, on Node 20, one warning that the runtime is past its end of life
// (Node 24 LTS is the production runtime: a 10,000-node fleet restart renews 2x slower on Node 20).
import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runtimeWarning } from '../src/node-runtime.js'
import { runController, spawnController } from './e2e/process.js'
import { testDir } from './support/test-dir.js'

const NODE_MAJOR = Number.parseInt(process.versions.node, 10)

t.test('the runtime warning: Node 20 and older only, naming the production runtime and the measured cost', async (t) => {
  for (const version of ['20.11.0', '20.20.2']) {
    const warning = runtimeWarning(version)
    t.ok(warning, `Node ${version}: a warning`)
    t.same(warning?.fields, { node: version, production_runtime: 'Node 24 LTS' })
    t.match(warning?.message, /past its end of life .*Node 24 LTS, the production runtime: a 10,000-node fleet restart renews every node about 2x slower on Node 20 \(38\.6 s against 17\.1 s/)
  }
  for (const version of ['22.12.0', '24.22.3', '25.0.0']) t.equal(runtimeWarning(version), null, `Node ${version}: none`)
})

t.test('a start that fails on its config prints the error and nothing else', async (t) => {
  const dir = testDir(t, {})
  const cases: [string, string, RegExp][] = [
    ['not JSON', '{"listen":', /^pxe-controller: .*controller\.json.*\n$/],
    ['a bad key', JSON.stringify({ listen: { host: '127.0.0.1', port: 8443 }, frobnicate: true }), /^pxe-controller: .*frobnicate.*\n$/],
  ]
  for (const [what, text, message] of cases) {
    const file = join(dir, 'controller.json')
    writeFileSync(file, text)
    const res = await runController(['--config', file], dir)
    t.equal(res.code, 1, `${what}: exit 1 (the start failed; not a usage error)`)
    t.equal(res.stdout, '', `${what}: no log line before the error (no "V8 left at its defaults")`)
    t.match(res.stderr, message, `${what}: one line: ${res.stderr.trim()}`)
  }
})

t.test('a good start: the V8 line after the config loaded, and the runtime warning once on Node 20 only', async (t) => {
  const dir = testDir(t, {})
  const ctl = await spawnController(['--port', '0', '--var', join(dir, 'var')], dir)
  ctl.child.kill('SIGTERM')
  t.equal(await ctl.exited, 0, 'stops on SIGTERM')
  const lines = ctl.stdout().split('\n').filter((l) => l.startsWith('{'))
  const index = (re: RegExp) => lines.findIndex((l) => re.test(l))
  const v8 = index(/"msg":"(V8 tuned for connection storms|V8 left at its defaults|V8's external-memory accounting as the operator set it)"/)
  t.ok(v8 > index(/creating a development CA/), 'the V8 line comes after the development config was made')
  t.ok(v8 < index(/controller listening/), 'and before the controller listens')
  const warnings = lines.filter((l) => /"production_runtime":"Node 24 LTS"/.test(l))
  if (NODE_MAJOR <= 20) {
    t.equal(warnings.length, 1, `Node ${process.versions.node}: one warning`)
    t.match(warnings[0], /"level":40,.*"node":"20\.[^"]+".*past its end of life/, 'at warn, through the logger')
  } else t.equal(warnings.length, 0, `Node ${process.versions.node}: no warning`)
  t.equal(ctl.stderr(), '', 'nothing on stderr')
})
