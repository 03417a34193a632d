// `pxe-ctl completion bash|zsh`: scripts generated from the command table. The bash script is checked
// by bash itself: it parses (bash -n), and sourced, its function completes what an operator types
// (COMP_WORDS / COMP_CWORD set as bash sets them, COMPREPLY read back). zsh is not installed on the CI
// machines, so its script is checked as text: every command, group word and flag is in it, with the
// wiring zsh needs (#compdef, compdef, _describe, _files).
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { GLOBAL_FLAGS } from '../../src/ctl/args.js'
import { COMMANDS } from '../../src/ctl/commands/index.js'
import { completionScript } from '../../src/ctl/completion.js'
import { runCtl } from './support.js'

const home = t.testdir({ files: { 'crl.pem': '', 'context.json': '' }, bundles: { alice: {} } })
const bash = await runCtl(['completion', 'bash'], { home })
const zsh = await runCtl(['completion', 'zsh'], { home })
const script = join(home, 'pxe-ctl.bash')
writeFileSync(script, bash.stdout)

/** What the completion function offers for the words typed so far (the last one is being completed). */
function complete(...words: string[]): string[] {
  const line = ['pxe-ctl', ...words]
  const quoted = line.map((w) => `'${w.replaceAll("'", "'\\''")}'`).join(' ')
  const program = `source '${script}'\ncd '${home}'\nCOMP_WORDS=(${quoted}); COMP_CWORD=${line.length - 1}; COMP_LINE="\${COMP_WORDS[*]}"; COMP_POINT=\${#COMP_LINE}\n_pxe_ctl\nprintf '%s\\n' "\${COMPREPLY[@]}"`
  const res = spawnSync('bash', ['--norc', '--noprofile', '-c', program], { encoding: 'utf8' })
  if (res.status !== 0) throw new Error(`bash: ${res.stderr}`)
  return res.stdout.split('\n').filter((l) => l !== '')
}

t.test('both shells: exit 0, the script on stdout, whatever -o says', async (t) => {
  for (const res of [bash, zsh]) {
    t.equal(res.code, 0)
    t.equal(res.stderr, '')
  }
  t.match(bash.stdout, /^# bash completion for pxe-ctl/)
  t.match(zsh.stdout, /^#compdef pxe-ctl\n/)
  t.equal((await runCtl(['completion', 'bash', '-o', 'json'], { home })).stdout, bash.stdout, '-o json changes nothing: the script is for a shell')
  t.equal(bash.stdout, `${completionScript('bash', { commands: COMMANDS, globalFlags: GLOBAL_FLAGS }).trimEnd()}\n`, 'made from the command table the parser uses')
})

t.test('bash: the script parses', async (t) => {
  const res = spawnSync('bash', ['-n', script], { encoding: 'utf8' })
  t.equal(res.status, 0, res.stderr)
})

t.test('bash: commands, group commands, flags and their values complete', async (t) => {
  t.same(complete('dr'), ['drain'], 'dr → drain')
  t.same(complete('un'), ['undrain'])
  t.same(complete('st'), ['status'])
  t.same(complete(''), [...new Set(COMMANDS.map((c) => c.words.split(' ')[0]!)), 'help'], 'every first word, in the order of the help')
  t.same(complete('context', 'i'), ['init'], 'a group: its commands')
  t.same(complete('crl', ''), ['push', 'help'])
  t.same(complete('help', 'wa'), ['watch'], 'help: the commands')
  t.same(complete('help', 'context', ''), ['init'])
  t.same(complete('drain', 'node-1', '--dr'), ['--dry-run'], 'a command: its flags')
  t.same(complete('drain', 'node-1', '--f'), ['--force'])
  t.same(complete('reshard', '--w'), ['--wait'])
  t.same(complete('watch', '--i'), ['--interval'])
  t.same(complete('status', '--'), GLOBAL_FLAGS.map((f) => `--${f.name}`), 'a command without flags of its own: the global ones')
  t.same(complete('--v'), ['--verbose', '--version'], 'before a command: the global flags and --version')
  t.same(complete('-o', 'j'), ['json'], 'a flag with fixed values')
  t.same(complete('status', '--output', ''), ['table', 'json'])
  t.same(complete('--context', `${home}/files/context.json`, '-v', 'st'), ['status'], "a flag's value is not taken for the command")
  t.same(complete('--context', `${home}/files/con`), [`${home}/files/context.json`], '--context: files')
  t.same(complete('-o', 'json', 'drain', 'node-1', '--ti'), ['--timeout'], 'global flags before the command')
  t.same(complete('reshard', ''), ['abort', 'status'], 'the fixed words of an argument')
  t.same(complete('reshard', '64', ''), [], 'no second argument')
  t.same(complete('completion', ''), ['bash', 'zsh'])
  t.same(complete('crl', 'push', `${home}/files/cr`), [`${home}/files/crl.pem`], 'a FILE argument: files')
  t.same(complete('context', 'init', '--bundle', `${home}/bun`), [`${home}/bundles`], 'a DIR flag: folders')
  t.same(complete('route', '--request-timeout', ''), [], 'a number: nothing to offer')
  t.same(complete('frobnicate', ''), [], 'an unknown command: nothing')
})

t.test('zsh: every command, group word and flag, and the wiring zsh needs', async (t) => {
  for (const c of COMMANDS) {
    const [first, second] = c.words.split(' ')
    t.match(zsh.stdout, `'${first}:`, `${first} is described`)
    if (second !== undefined) t.match(zsh.stdout, `'${second}:`, `${c.words}: ${second} is described`)
    t.match(zsh.stdout, new RegExp(`\\('${c.words}'\\) compadd -- ${[...c.flags, ...GLOBAL_FLAGS].map((f) => `--${f.name}${f.short ? ` -${f.short}` : ''}`).join(' ')} ;;`), `${c.words}: its flags, then the global ones`)
  }
  t.match(zsh.stdout, /\(--output\|-o\) compadd -- table json; return ;;/, "-o's values")
  t.match(zsh.stdout, /\(--bundle\) _files -\/; return ;;/, 'a DIR: folders')
  t.match(zsh.stdout, /\('crl push'\) case \$npos in \(0\) _files ;; esac ;;/, 'a FILE: files')
  t.match(zsh.stdout, /\('completion'\) case \$npos in \(0\) compadd -- bash zsh ;; esac ;;/)
  t.match(zsh.stdout, /_describe -t commands 'pxe-ctl command' cmds/)
  t.match(zsh.stdout, /compdef _pxe-ctl pxe-ctl\n/, 'sourced: registers itself')
  t.match(zsh.stdout, /if \[\[ \$\{funcstack\[1\]\} == _pxe-ctl \]\]; then\n {2}_pxe-ctl "\$@"/, 'autoloaded from $fpath: runs')
  t.match(zsh.stdout, /'undrain:clear a node'\\''s drain flag/, 'a quote in a summary is escaped')
  // Balanced: each case has its esac, each if its fi, each function its closing brace.
  const count = (re: RegExp) => (zsh.stdout.match(re) ?? []).length
  t.equal(count(/\bcase\b/g), count(/\besac\b/g), 'case … esac')
  t.equal(count(/\bif\b/g), count(/\bfi\b/g), 'if … fi')
})

const ZSH = spawnSync('zsh', ['--version']).status === 0

t.test('zsh, where it is installed: the script parses and, with the completion builtins stubbed, offers the right words', { skip: ZSH ? false : 'zsh is not installed' }, async (t) => {
  const file = join(home, '_pxe-ctl')
  writeFileSync(file, zsh.stdout)
  t.equal(spawnSync('zsh', ['-n', file], { encoding: 'utf8' }).status, 0, 'zsh -n')
  // compadd, _describe and _files print what they are given; zsh itself filters by what is typed.
  const offered = (...words: string[]) => {
    const program = `compdef() { : }\nsource '${file}'\ncompadd() { local a; for a in "$@"; do [[ $a == -- ]] || print -r -- "$a"; done }\n_describe() { local arr=\${@[-1]}; print -rl -- \${(P)arr%%:*} }\n_files() { print -r -- "<files $*>" }\nwords=(pxe-ctl ${words.map((w) => `'${w}'`).join(' ')}); CURRENT=\${#words}\n_pxe-ctl`
    const res = spawnSync('zsh', ['-f', '-c', program], { encoding: 'utf8' })
    if (res.status !== 0) throw new Error(`zsh: ${res.stderr}`)
    return res.stdout.split('\n').filter((l) => l !== '')
  }
  t.same(offered(''), [...new Set(COMMANDS.map((c) => c.words.split(' ')[0]!)), 'help'])
  t.same(offered('context', ''), ['init', 'help'])
  t.same(offered('drain', 'x', '--dr'), [...drainFlags()])
  t.same(offered('-o', ''), ['table', 'json'])
  t.same(offered('crl', 'push', ''), ['<files >'])
  t.same(offered('context', 'init', '--bundle', ''), ['<files -/>'])
  t.same(offered('completion', ''), ['bash', 'zsh'])
})

function drainFlags(): string[] {
  const drain = COMMANDS.find((c) => c.words === 'drain')!
  return [...drain.flags, ...GLOBAL_FLAGS].flatMap((f) => [`--${f.name}`, ...(f.short ? [`-${f.short}`] : [])])
}

t.test('the generator refuses what would break a script or complete wrongly', async (t) => {
  const drain = COMMANDS.find((c) => c.words === 'drain')!
  const spoof = { ...drain, words: 'drain; rm' }
  t.throws(() => completionScript('bash', { commands: [spoof], globalFlags: GLOBAL_FLAGS }), /not a plain word/)
  const clash = { ...drain, words: 'other', flags: [{ name: 'timeout', help: 'a switch here, a value in drain' }] }
  t.throws(() => completionScript('zsh', { commands: [drain, clash], globalFlags: GLOBAL_FLAGS }), /--timeout differs between commands/)
})
