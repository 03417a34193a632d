// pxe-ctl's command line (main() in this process, see support.ts): --help and `help CMD` for every
// command, naming every flag; the top-level help with the context lookup order and the exit statuses;
// usage errors exit 2 with the command's usage and nothing on stdout. The last test runs the bin as a
// process: the built CLI, its exit status passed on (0 for --help, 2 for a usage error).
import t from 'tap'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { GLOBAL_FLAGS } from '../../src/ctl/args.js'
import { COMMANDS } from '../../src/ctl/commands/index.js'
import { runCtl } from './support.js'

const home = t.testdir({})
const ctl = (...args: string[]) => runCtl(args, { home })

t.test('the top-level help: every command, the global flags, the context lookup order, the exit statuses', async (t) => {
  for (const args of [['--help'], ['-h'], ['help']]) {
    const res = await ctl(...args)
    t.equal(res.code, 0, args.join(' '))
    t.equal(res.stderr, '')
    for (const c of COMMANDS) t.match(res.stdout, `  ${c.words} `, `${args.join(' ')} lists ${c.words}`)
    for (const f of GLOBAL_FLAGS) t.match(res.stdout, `--${f.name}`, `${args.join(' ')} lists --${f.name}`)
    t.match(res.stdout, /1\. --context FILE\n\s+2\. \$PXE_CONTEXT\n\s+3\. ~\/\.config\/pxe-ctl\/context\.json/)
    t.match(res.stdout, /exit status: 0 success .*; 1 the\noperation failed .*\n2 usage error/s)
    t.match(res.stdout, /not_leader/)
  }
})

t.test('every command: --help and help CMD exit 0 and explain every flag', async (t) => {
  for (const c of COMMANDS) {
    const viaFlag = await ctl(...c.words.split(' '), '--help')
    const viaHelp = await ctl('help', ...c.words.split(' '))
    for (const [how, res] of [['--help', viaFlag], ['help CMD', viaHelp]] as const) {
      t.equal(res.code, 0, `${c.words} ${how}`)
      t.match(res.stdout, `usage: pxe-ctl ${c.words}`, `${c.words} ${how}: usage`)
      for (const f of [...c.flags, ...GLOBAL_FLAGS]) t.match(res.stdout, new RegExp(`--${f.name}${f.value ? ` ${f.value}` : ''}\\s+\\S`), `${c.words} ${how}: --${f.name} explained`)
      t.match(res.stdout, /exit status: 0/, `${c.words} ${how}: exit statuses`)
    }
    t.equal(viaFlag.stdout, viaHelp.stdout, `${c.words}: the same text both ways`)
  }
})

t.test('usage errors: exit 2, the message and the usage of that command on stderr, nothing on stdout', async (t) => {
  const cases: [string[], RegExp, RegExp][] = [
    [[], /missing command/, /pxe-ctl --help/],
    [['frobnicate'], /unknown command "frobnicate"/, /pxe-ctl --help/],
    [['context'], /"context" needs one of: init/, /pxe-ctl --help/],
    [['context', 'drop'], /unknown command "context drop"/, /pxe-ctl --help/],
    [['crl'], /"crl" needs one of: push/, /pxe-ctl --help/],
    [['help', 'frobnicate'], /no command "frobnicate"/, /pxe-ctl --help/],
    [['status', '--wait'], /^pxe-ctl: unknown option --wait\n/, /usage: pxe-ctl status/],
    [['status', 'extra'], /unexpected argument "extra"/, /usage: pxe-ctl status/],
    [['status', '-o', 'yaml'], /-o must be table or json/, /usage: pxe-ctl status/],
    [['status', '--request-timeout', '0'], /--request-timeout must be a number of seconds in 0\.1\.\.600/, /usage: pxe-ctl status/],
    [['nodes', '-o'], /option --output needs a value/, /usage: pxe-ctl nodes/],
    [['status', '-v', '-v'], /--verbose is given more than once/, /usage: pxe-ctl status/],
    [['drain'], /missing NODE/, /usage: pxe-ctl drain NODE/],
    [['route'], /missing GUILD_ID/, /usage: pxe-ctl route GUILD_ID/],
    [['reshard'], /missing N\|abort\|status/, /usage: pxe-ctl reshard/],
    [['reshard', '1.5'], /N must be an integer in 1\.\.65536/, /usage: pxe-ctl reshard/],
    [['watch', '--interval', '0'], /--interval must be a number of seconds in 0\.2\.\.3600/, /usage: pxe-ctl watch/],
    [['watch', '--interval', '1e3'], /--interval must be a number of seconds/, /usage: pxe-ctl watch/],
    [['crl', 'push'], /missing FILE/, /usage: pxe-ctl crl push FILE/],
    [['--context', '', 'status'], /--context needs a file path/, /usage: pxe-ctl status/],
  ]
  for (const [args, message, usage] of cases) {
    const res = await ctl(...args)
    const what = args.join(' ') || '(nothing)'
    t.equal(res.code, 2, `${what}: exit 2`)
    t.match(res.stderr, message, `${what}: ${res.stderr.split('\n')[0]}`)
    t.match(res.stderr, usage, `${what}: usage`)
    t.equal(res.stdout, '', `${what}: nothing on stdout`)
  }
})

t.test('bin/pxe-ctl.js runs the built CLI and exits with its status', async (t) => {
  const bin = fileURLToPath(new URL('../../bin/pxe-ctl.js', import.meta.url))
  const run = async (...args: string[]) => {
    const child = spawn(process.execPath, [bin, ...args], { env: { PATH: process.env.PATH, HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d))
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d))
    const code = await new Promise((resolve) => child.on('close', resolve))
    return { code, out, err }
  }
  const help = await run('--help')
  t.equal(help.code, 0, '--help: 0')
  t.match(help.out, /^usage: pxe-ctl/)
  const usage = await run('frobnicate')
  t.equal(usage.code, 2, 'a usage error: 2')
  t.match(usage.err, /unknown command "frobnicate"/)
  const failed = await run('status') // HOME holds no context file
  t.equal(failed.code, 1, 'a failed operation: 1')
  t.match(failed.err, /context/)
  t.equal(failed.out, '', 'nothing on stdout')
})
