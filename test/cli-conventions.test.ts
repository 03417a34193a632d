// The command-line conventions of the four bins, run as an operator runs them (`node bin/<bin>.js`, the
// build in dist/): --version prints "<bin> <package version>"; help on the bin, every command group and
// a command exits 0 on stdout; a usage error exits 2 with one line of our own (did-you-mean when a
// command or flag is close, never parseArgs's boilerplate) and a hint to --help; a reader that closes
// the pipe ends the bin quietly with status 0 instead of an EPIPE stack trace.
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { testDir } from './support/test-dir.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string; bin: Record<string, string> }
const BINS = ['pxe-controller', 'pxe-pki', 'pxe-node', 'pxe-ctl'] as const
type Bin = (typeof BINS)[number]
const BUILT = existsSync(join(ROOT, 'dist', 'src', 'main.js'))
const home = testDir(t, {})

// NODE_OPTIONS: tap's loader (tsx) must not reach the bins, which run plain JavaScript. HOME: no
// operator's own pxe-ctl context; the cwd: nothing of the clone's var/.
const ENV = { PATH: process.env.PATH, HOME: home, NODE_OPTIONS: '' }
const binPath = (bin: Bin) => join(ROOT, pkg.bin[bin]!)
const run = (bin: Bin, args: readonly string[]) => spawnSync(process.execPath, [binPath(bin), ...args], { cwd: home, encoding: 'utf8', timeout: 30_000, env: ENV })

t.before(() => {
  if (!BUILT) throw new Error('dist/ is missing: run "npm run build" (npm test does it first)')
})

t.test('every bin: --version and -V print "<bin> <version of package.json>", exit 0', async (t) => {
  t.same(Object.keys(pkg.bin).sort(), [...BINS].sort(), 'the four bins of package.json')
  for (const bin of BINS) {
    for (const flag of ['--version', '-V']) {
      const res = run(bin, [flag])
      t.equal(res.status, 0, `${bin} ${flag}: exit 0`)
      t.equal(res.stdout, `${bin} ${pkg.version}\n`, `${bin} ${flag}`)
      t.equal(res.stderr, '', `${bin} ${flag}: nothing on stderr`)
    }
  }
  for (const [bin, args] of [['pxe-ctl', ['version']], ['pxe-pki', ['version']]] as const) {
    t.equal(run(bin, args).stdout, `${bin} ${pkg.version}\n`, `${bin} ${args.join(' ')}`)
  }
  t.same(JSON.parse(run('pxe-ctl', ['version', '-o', 'json']).stdout), { name: 'pxe-ctl', version: pkg.version }, 'pxe-ctl version -o json')
})

t.test('every bin, command group and command: help on stdout, exit 0', async (t) => {
  const cases: [Bin, string[], RegExp][] = [
    ['pxe-controller', ['--help'], /^Usage: pxe-controller .*Exit status: 0 .*; 2 usage error/s],
    ['pxe-controller', ['-h'], /^Usage: pxe-controller/],
    ['pxe-pki', ['--help'], /^usage: pxe-pki .*exit status: 0 .*; 2 usage error/s],
    ['pxe-pki', ['-h'], /^usage: pxe-pki/],
    ['pxe-pki', ['help'], /^usage: pxe-pki/],
    ['pxe-pki', ['help', 'issue'], /^usage: pxe-pki issue /],
    ['pxe-pki', ['issue', '--help'], /^usage: pxe-pki issue .*exit status: 0/s],
    ['pxe-pki', ['plan-key', '--help'], /^usage: pxe-pki plan-key rotate/],
    ['pxe-node', ['--help'], /^Usage: pxe-node .*Exit status: 0 .*; 2 bad command line/s],
    ['pxe-node', ['-h'], /^Usage: pxe-node/],
    ['pxe-ctl', ['--help'], /^usage: pxe-ctl .*completion .*--version/s],
    ['pxe-ctl', ['-h'], /^usage: pxe-ctl/],
    ['pxe-ctl', ['help'], /^usage: pxe-ctl/],
    ['pxe-ctl', ['context', '--help'], /^usage: pxe-ctl context COMMAND .*context init .*exit status: 0/s],
    ['pxe-ctl', ['context', '-h'], /^usage: pxe-ctl context COMMAND/],
    ['pxe-ctl', ['context', 'help'], /^usage: pxe-ctl context COMMAND/],
    ['pxe-ctl', ['help', 'context'], /^usage: pxe-ctl context COMMAND/],
    ['pxe-ctl', ['crl', '--help'], /^usage: pxe-ctl crl COMMAND .*crl push FILE/s],
    ['pxe-ctl', ['crl', 'help'], /^usage: pxe-ctl crl COMMAND/],
    ['pxe-ctl', ['help', 'crl'], /^usage: pxe-ctl crl COMMAND/],
    ['pxe-ctl', ['help', 'context', 'init'], /^usage: pxe-ctl context init /],
    ['pxe-ctl', ['context', 'init', '--help'], /^usage: pxe-ctl context init /],
    ['pxe-ctl', ['drain', '--help'], /^usage: pxe-ctl drain NODE/],
    ['pxe-ctl', ['completion', '--help'], /^usage: pxe-ctl completion bash\|zsh/],
  ]
  for (const [bin, args, text] of cases) {
    const res = run(bin, args)
    const what = `${bin} ${args.join(' ')}`
    t.equal(res.status, 0, `${what}: exit 0`)
    t.match(res.stdout, text, `${what}: the help`)
    t.equal(res.stderr, '', `${what}: nothing on stderr`)
  }
})

t.test('every bin: a usage error exits 2 with one line of our own and a hint to --help', async (t) => {
  // [bin, args, the first line of stderr exactly, where the hint points]
  const cases: [Bin, string[], string, string][] = [
    ['pxe-controller', ['--frobnicate'], 'pxe-controller: unknown option --frobnicate', 'pxe-controller --help'],
    ['pxe-controller', ['--confg', 'x.json'], 'pxe-controller: unknown option --confg; did you mean --config?', 'pxe-controller --help'],
    ['pxe-controller', ['--config'], 'pxe-controller: option --config needs a value', 'pxe-controller --help'],
    ['pxe-controller', ['--port', '8443x'], 'pxe-controller: --port must be an integer 0..65535, got "8443x"', 'pxe-controller --help'],
    ['pxe-controller', ['--host', '10.0.0.5'], 'pxe-controller: development mode listens on loopback only; refusing host "10.0.0.5" (use --config for a production deployment)', 'pxe-controller --help'],
    ['pxe-controller', ['--config', 'c.json', '--port', '1'], 'pxe-controller: --var, --host and --port are for the development default; set listen in the config file', 'pxe-controller --help'],
    ['pxe-controller', ['start'], 'pxe-controller: unexpected argument "start"', 'pxe-controller --help'],
    ['pxe-pki', ['isue', 'node-1'], 'pxe-pki: error: unknown command "isue" (did you mean "issue"?); run "pxe-pki --help" for the list', 'pxe-pki --help'],
    ['pxe-pki', ['issue', 'node-1', '--rol', 'node'], 'pxe-pki: error: unknown option --rol for "issue" (did you mean --role?); see "pxe-pki issue --help"', 'pxe-pki issue --help'],
    ['pxe-pki', ['list', '--json=yes'], 'pxe-pki: error: option --json of "list" takes no value; see "pxe-pki list --help"', 'pxe-pki list --help'],
    ['pxe-pki', ['help', 'revoek'], 'pxe-pki: error: no command "revoek" (did you mean "revoke"?); run "pxe-pki --help" for the list', 'pxe-pki --help'],
    ['pxe-pki', [], 'pxe-pki: error: missing command; run "pxe-pki --help" for the list', 'pxe-pki --help'],
    ['pxe-node', ['--capcity', '2'], 'pxe-node: unknown option --capcity; did you mean --capacity?', 'pxe-node --help'],
    ['pxe-node', ['--bundle'], 'pxe-node: option --bundle needs a value', 'pxe-node --help'],
    ['pxe-node', [], 'pxe-node: --bundle DIR is required (the folder made by "pxe-pki issue NAME --role node")', 'pxe-node --help'],
    ['pxe-ctl', ['drian', 'node-1'], 'pxe-ctl: unknown command "drian"; did you mean "drain"?', 'pxe-ctl --help'],
    ['pxe-ctl', ['drain', 'node-1', '--dryrun'], 'pxe-ctl: unknown option --dryrun; did you mean --dry-run?', 'pxe-ctl drain --help'],
    ['pxe-ctl', ['context', 'int'], 'pxe-ctl: unknown command "context int"; did you mean "context init"?', 'pxe-ctl --help'],
    ['pxe-ctl', ['help', 'stauts'], 'pxe-ctl: no command "stauts"; did you mean "status"?', 'pxe-ctl --help'],
    ['pxe-ctl', ['watch', '--interval'], 'pxe-ctl: option --interval needs a value', 'pxe-ctl watch --help'],
    ['pxe-ctl', ['completion', 'fish'], 'pxe-ctl: the shell must be bash or zsh (got "fish")', 'pxe-ctl completion --help'],
    ['pxe-ctl', [], 'pxe-ctl: missing command', 'pxe-ctl --help'],
  ]
  for (const [bin, args, first, hint] of cases) {
    const res = run(bin, args)
    const what = `${bin} ${args.join(' ')}`.trim()
    t.equal(res.status, 2, `${what}: exit 2`)
    t.equal(res.stderr.split('\n')[0], first, `${what}: the message`)
    t.match(res.stderr, `"${hint}"`, `${what}: points to ${hint}`)
    t.notMatch(res.stderr, /To specify a positional|Unknown option '|\n\s+at /, `${what}: no parseArgs boilerplate, no stack`)
    t.equal(res.stdout, '', `${what}: nothing on stdout`)
  }
})

/** Runs `bin args` with its stdout a pipe whose reader is already gone, as after `| head`. */
function closedPipe(bin: Bin, args: readonly string[]): Promise<{ code: number | null; signal: string | null; stderr: string }> {
  const child = spawn(process.execPath, [binPath(bin), ...args], { cwd: home, env: ENV, stdio: ['ignore', 'pipe', 'pipe'] })
  child.stdout.destroy() // the reader leaves before the bin writes its first byte
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
  return new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stderr })))
}

t.test('every bin: a reader that closed the pipe ends it quietly, status 0 (no EPIPE stack trace)', async (t) => {
  const cases: [Bin, string[]][] = [
    ['pxe-controller', ['--help']],
    ['pxe-controller', ['--version']],
    ['pxe-pki', ['--help']],
    ['pxe-node', ['--help']],
    ['pxe-ctl', ['--help']],
    ['pxe-ctl', ['completion', 'bash']],
  ]
  for (const [bin, args] of cases) {
    const res = await closedPipe(bin, args)
    const what = `${bin} ${args.join(' ')} | (closed)`
    t.same([res.code, res.signal], [0, null], `${what}: exit 0`)
    t.equal(res.stderr, '', `${what}: nothing on stderr (no EPIPE, no stack)`)
  }
})
