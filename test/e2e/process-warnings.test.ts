// Process warnings land in the JSON log, never as Node's plain "(node:PID) Warning: ..." lines: the
// compiled controller (dev default) and the compiled pxe-node, each as a child process, get a test hook
// through NODE_OPTIONS --import that emits a warning on SIGUSR2 (by then the entry point has replaced
// Node's printer), and their output is read line by line. ProcessWarnings itself: warnings taken before a
// logger is attached are logged, in order, once it is.
import t, { type Test } from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { ProcessWarnings, warningFields } from '../../src/log/process-warnings.js'
import { testDir } from '../support/test-dir.js'
import { until } from '../ha/replica.js'

const DIST = fileURLToPath(new URL('../../dist/', import.meta.url))
if (!existsSync(join(DIST, 'src', 'main.js'))) throw new Error('dist/ is missing: run "npm run build" (npm test does it first)')

const HOOK = `process.on('SIGUSR2', () => {
  process.emitWarning('a test warning', { code: 'PXE_TEST_WARNING', detail: 'emitted by the test hook' })
  process.emitWarning('a test deprecation', 'DeprecationWarning', 'PXE_TEST_DEP')
})
`

interface Child {
  readonly child: ChildProcess
  out: string
  err: string
}

function start(args: string[], cwd: string, hook: string): Child {
  const child = spawn(process.execPath, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_OPTIONS: `--import=${pathToFileURL(hook).href}`, LOG_LEVEL: 'info' } })
  const c: Child = { child, out: '', err: '' }
  child.stdout!.on('data', (d: Buffer) => (c.out += d.toString()))
  child.stderr!.on('data', (d: Buffer) => (c.err += d.toString()))
  return c
}

const jsonLines = (text: string) =>
  text.split('\n').flatMap((line) => {
    try {
      const v = JSON.parse(line)
      return typeof v === 'object' && v !== null ? [v] : []
    } catch {
      return []
    }
  })

/** Every line of `text` that carries a warning but is not a JSON object. */
const plainWarningLines = (text: string) => text.split('\n').filter((l) => /Warning|\(node:\d+\)|PXE_TEST/.test(l) && jsonLines(l).length === 0)

async function checkWarningsLogged(t: Test, name: string, c: Child): Promise<void> {
  c.child.kill('SIGUSR2')
  const logged = () => jsonLines(c.out).filter((l) => l.process_warning !== undefined)
  await until(() => logged().length === 2, 20_000, `${name} logs both warnings`).catch((err: Error) => {
    throw new Error(`${err.message}\nstdout:\n${c.out}\nstderr:\n${c.err}`)
  })
  const [warning, deprecation] = logged()
  t.match(warning, { level: 40, msg: 'a test warning', process_warning: { name: 'Warning', code: 'PXE_TEST_WARNING', detail: 'emitted by the test hook' } }, `${name}: a pino warn line with name, code, detail`)
  t.match(deprecation, { level: 40, msg: 'a test deprecation', process_warning: { name: 'DeprecationWarning', code: 'PXE_TEST_DEP' } })
  t.same(plainWarningLines(c.out), [], `${name}: no plain warning line on stdout`)
  t.same(plainWarningLines(c.err), [], `${name}: none on stderr`)
}

t.test('the controller and pxe-node log process warnings as JSON lines', async (t) => {
  const cwd = testDir(t, {})
  const hook = join(cwd, 'warn-hook.mjs')
  writeFileSync(hook, HOOK)
  const ctl = start([join(DIST, 'src', 'main.js'), '--port', '0'], cwd, hook)
  t.teardown(() => void ctl.child.kill('SIGKILL'))
  await until(() => /"msg":"controller listening/.test(ctl.out) || ctl.child.exitCode !== null, 90_000, 'the dev controller listens')
  const port = Number(/"port":(\d+),"mode":"development"/.exec(ctl.out)?.[1])
  t.ok(port > 0, 'the dev controller listens')
  await checkWarningsLogged(t, 'controller', ctl)

  const node = start([join(DIST, 'src', 'agent', 'cli.js'), '--bundle', join('var', 'pki', 'bundles', 'dev-node-1'), '--controller', `https://127.0.0.1:${port}`], cwd, hook)
  t.teardown(() => void node.child.kill('SIGKILL'))
  await until(() => jsonLines(node.out).length > 0 || node.child.exitCode !== null, 30_000, 'pxe-node logs')
  await checkWarningsLogged(t, 'pxe-node', node)
  for (const c of [node, ctl]) {
    c.child.kill('SIGTERM')
    await new Promise((r) => c.child.once('exit', r))
  }
})

t.test('warnings taken before a logger exists are logged once it is attached, in order', async (t) => {
  const warnings = new ProcessWarnings()
  const early = Object.assign(new Error('early'), { name: 'ExperimentalWarning' })
  const coded = Object.assign(new Error('coded'), { name: 'DeprecationWarning', code: 'DEP0001' })
  warnings.take(early)
  warnings.take(coded)
  const lines: [object, string][] = []
  warnings.attach({ warn: ((fields: object, msg: string) => lines.push([fields, msg])) as never })
  warnings.take(new Error('late'))
  t.same(lines, [
    [{ process_warning: { name: 'ExperimentalWarning', code: null } }, 'early'],
    [{ process_warning: { name: 'DeprecationWarning', code: 'DEP0001' } }, 'coded'],
    [{ process_warning: { name: 'Error', code: null } }, 'late'],
  ])
  const flags = process as { traceProcessWarnings?: boolean }
  const before = flags.traceProcessWarnings
  flags.traceProcessWarnings = true // as --trace-warnings sets it
  t.teardown(() => void (flags.traceProcessWarnings = before))
  t.match(warningFields(early), { process_warning: { stack: /^ExperimentalWarning: early\n\s+at / } }, 'with --trace-warnings the stack too')
  flags.traceProcessWarnings = before
  t.notOk('stack' in warningFields(early).process_warning, 'else no stack')
  const unattached = new ProcessWarnings()
  unattached.take(coded)
  t.match(JSON.parse(unattached.heldLines('pxe-node')[0]!), { level: 40, service: 'pxe-node', process_warning: { code: 'DEP0001' }, msg: 'coded' }, 'held at exit: a JSON line in pino\'s shape')
})
