// The controller's node flags (src/controller-node-flags.ts) are passed by every way this package starts
// it, the running node accepts them, and a start without them says so in its log.
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { CONTROLLER_NODE_FLAGS, missingNodeFlags } from '../src/controller-node-flags.js'
import { spawnController } from './e2e/process.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8')

t.test('every launcher of the controller passes each flag before the script', async (t) => {
  const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> }
  const launchers: Array<[string, string]> = [
    ['package.json "start"', pkg.scripts['start']!],
    ['bin/pxe-controller.js shebang', read('bin/pxe-controller.js').split('\n')[0]!],
    ['deploy/pxe-controller.service ExecStart', read('deploy/pxe-controller.service').split('\n').find((l) => l.startsWith('ExecStart='))!],
    ['deploy/Dockerfile ENTRYPOINT', read('deploy/Dockerfile').split('\n').find((l) => l.startsWith('ENTRYPOINT'))!],
    ...read('deploy/ha-local.sh')
      .split('\n')
      .filter((l) => l.includes('dist/src/main.js') && /\bnode\b/.test(l) && !l.includes('[ ! -f'))
      .map((l): [string, string] => ['deploy/ha-local.sh', l]),
  ]
  t.equal(launchers.filter(([where]) => where === 'deploy/ha-local.sh').length, 2, 'ha-local.sh: the start and the line that shows it by hand')
  for (const [where, line] of launchers) {
    t.ok(line, `${where} found`)
    for (const flag of CONTROLLER_NODE_FLAGS) {
      const at = line.indexOf(flag)
      t.ok(at > 0, `${where} passes ${flag}`)
      // after the script it would be the controller's own argument (refused), not node's
      const script = Math.max(line.indexOf('main.js'), line.indexOf('#!') === 0 ? line.length : -1)
      t.ok(at < script, `${where}: ${flag} comes before the script`)
    }
  }
})

t.test('this node accepts the flags (a V8 flag it does not know would stop the start)', async (t) => {
  const run = spawnSync(process.execPath, [...CONTROLLER_NODE_FLAGS, '-e', 'process.stdout.write("ok")'], { encoding: 'utf8' })
  t.equal(run.status, 0, run.stderr)
  t.equal(run.stdout, 'ok')
  t.equal(run.stderr, '', 'no warning about an unknown flag')
})

t.test('missingNodeFlags names what execArgv lacks', async (t) => {
  t.same(missingNodeFlags([...CONTROLLER_NODE_FLAGS, '--expose-gc']), [])
  t.same(missingNodeFlags(['--expose-gc']), [...CONTROLLER_NODE_FLAGS])
  t.same(missingNodeFlags([]), [...CONTROLLER_NODE_FLAGS])
})

t.test('a start with the flags logs no warning; one without them warns once, and still starts', async (t) => {
  const cwd = mkdtempSync(join(tmpdir(), 'pxe-node-flags-'))
  t.teardown(() => rmSync(cwd, { recursive: true, force: true }))
  const warning = /"level":40,[^\n]*started without the controller's flags/g
  for (const [label, flags, expected] of [
    ['as production starts it', CONTROLLER_NODE_FLAGS, 0],
    ['as `node dist/src/main.js` (an old unit file, a start by hand)', [], 1],
  ] as const) {
    const ctl = await spawnController(['--port', '0'], cwd, 90_000, flags)
    // the warning comes right after the listening line; give the pipe a moment
    await new Promise((r) => setTimeout(r, 200))
    ctl.child.kill('SIGTERM')
    t.equal(await ctl.exited, 0, `${label}: stops cleanly`)
    const lines = ctl.stdout().match(warning) ?? []
    t.equal(lines.length, expected, `${label}: ${expected} warning line(s)`)
    if (expected > 0) t.match(ctl.stdout(), `"missing":${JSON.stringify(CONTROLLER_NODE_FLAGS)}`, 'names the missing flags')
  }
})
