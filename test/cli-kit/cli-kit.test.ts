// What the four bins share about command lines (src/cli-kit): the edit distance and the suggestion it
// makes, the flag checks in one line of our own, the version read from package.json wherever the code
// runs from, and the closed-pipe rule. The bins themselves are run in test/cli-conventions.test.ts.
import t from 'tap'
import { EventEmitter } from 'node:events'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ArgvError, parseArgv, repeatedFlag } from '../../src/cli-kit/argv.js'
import { CLOSED_PIPE_EXIT, endQuietlyOnClosedPipe } from '../../src/cli-kit/closed-pipe.js'
import { didYouMean, editDistance, suggestion } from '../../src/cli-kit/did-you-mean.js'
import { PACKAGE_NAME, packageVersion } from '../../src/cli-kit/version.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string }

t.test('edit distance: insertions, deletions, replacements, and a swap of neighbours as one edit', async (t) => {
  t.equal(editDistance('drain', 'drain'), 0)
  t.equal(editDistance('drian', 'drain'), 1, 'a swap')
  t.equal(editDistance('dryrun', 'dry-run'), 1, 'an insertion')
  t.equal(editDistance('statuss', 'status'), 1, 'a deletion')
  t.equal(editDistance('stetus', 'status'), 1, 'a replacement')
  t.equal(editDistance('', 'abc'), 3)
  t.equal(editDistance('ca', 'abc'), 3, 'restricted: a swapped pair is not edited again')
  t.equal(editDistance('kitten', 'sitting'), 3)
})

t.test('did you mean: the nearest known word within the limit, else the one word a prefix names', async (t) => {
  const commands = ['context', 'status', 'nodes', 'drain', 'undrain', 'route', 'reshard', 'watch', 'crl', 'help']
  t.equal(didYouMean('drian', commands), 'drain')
  t.equal(didYouMean('stauts', commands), 'status')
  t.equal(didYouMean('node', commands), 'nodes')
  t.equal(didYouMean('DRAIN', commands), 'drain', 'case does not count')
  t.equal(didYouMean('frobnicate', commands), null, 'nothing close')
  t.equal(didYouMean('xyz', commands), null, 'three characters: one edit at most')
  t.equal(didYouMean('crx', commands), 'crl', 'one edit in three characters')
  t.equal(didYouMean('wa', commands), 'watch', 'a prefix of one word')
  t.equal(didYouMean('un', ['undo', 'undrain']), null, 'a prefix of two words names none')
  t.equal(didYouMean('d', commands), null, 'one character is no prefix')
  t.equal(didYouMean('rout', ['route', 'router']), 'route', 'a tie goes to the word listed first')
  t.equal(suggestion('dryrun', ['wait', 'dry-run'], (w) => `--${w}`), '; did you mean --dry-run?')
  t.equal(suggestion('zzz', ['wait']), '')
})

const FLAGS = { 'dry-run': { type: 'boolean' }, timeout: { type: 'string' }, output: { type: 'string', short: 'o' }, help: { type: 'boolean', short: 'h' } } as const

t.test('flags: values and positionals as parseArgs reads them', async (t) => {
  const parsed = parseArgv(['x', '--dry-run', '-o', 'json', '--timeout=-5'], FLAGS, { allowPositionals: true })
  t.same(parsed.positionals, ['x'])
  t.same(parsed.values, { 'dry-run': true, output: 'json', timeout: '-5' }, 'a value that begins with "-" written with "="')
  t.same(parsed.options.map((o) => o.rawName), ['--dry-run', '-o', '--timeout'])
  t.equal(repeatedFlag(parseArgv(['-o', 'json', '--output', 'table'], FLAGS, { allowPositionals: false }).options), 'output', 'short and long count as one flag')
  t.equal(repeatedFlag(parsed.options), null)
  t.same(parseArgv(['--', '--timeout'], FLAGS, { allowPositionals: true }).positionals, ['--timeout'], 'after --, a positional')
})

t.test("flags: every problem in one line of our own, with the flag meant, never parseArgs's boilerplate", async (t) => {
  const cases: [string[], string, string, string, string | null][] = [
    [['--dryrun'], 'unknown option --dryrun; did you mean --dry-run?', 'unknown_option', '--dryrun', '--dry-run'],
    [['--dryrun=yes'], 'unknown option --dryrun; did you mean --dry-run?', 'unknown_option', '--dryrun', '--dry-run'],
    [['--frobnicate'], 'unknown option --frobnicate', 'unknown_option', '--frobnicate', null],
    [['-x'], 'unknown option -x', 'unknown_option', '-x', null],
    [['-hx'], 'unknown option -x', 'unknown_option', '-x', null],
    [['--timeout'], 'option --timeout needs a value', 'needs_value', '--timeout', null],
    [['-o'], 'option --output needs a value', 'needs_value', '--output', null],
    [['--timeout', '--dry-run'], 'option --timeout needs a value (got the option "--dry-run"; write --timeout=VALUE for a value that begins with "-")', 'needs_value', '--timeout', null],
    [['--help=3'], 'option --help takes no value (got "3")', 'takes_no_value', '--help', null],
    [['extra'], 'unexpected argument "extra"', 'unexpected_argument', 'extra', null],
    [['--\u0007bell'], 'unknown option --?bell', 'unknown_option', '--?bell', null],
  ]
  for (const [args, message, problem, argument, near] of cases) {
    const err = (() => {
      try {
        parseArgv(args, FLAGS, { allowPositionals: false })
      } catch (e) {
        return e
      }
      return null
    })()
    t.ok(err instanceof ArgvError, `${args.join(' ')}: refused`)
    t.match(err, { message, problem, argument, near }, args.join(' '))
    t.notMatch((err as Error).message, /'/, `${args.join(' ')}: no quote of parseArgs's`)
  }
})

t.test("the version is the package's, found from the source and from a built copy's place", async (t) => {
  t.match(PKG.version, /^\d+\.\d+\.\d+/)
  t.equal(PKG.name, PACKAGE_NAME)
  t.equal(packageVersion(), PKG.version, 'from src/cli-kit (a clone, through tsx)')
  // An installed tarball: node_modules/<name>/dist/src/cli-kit/version.js, below another project's package.json.
  // Outside the clone: walking up from a folder inside it would reach this repository's package.json.
  const root = mkdtempSync(join(tmpdir(), 'pxe-version-'))
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'someone-elses-app', version: '9.9.9' }))
  const installed = join(root, 'node_modules', PACKAGE_NAME)
  mkdirSync(join(installed, 'dist', 'src', 'cli-kit'), { recursive: true })
  writeFileSync(join(installed, 'package.json'), JSON.stringify({ name: PACKAGE_NAME, version: '1.2.3-rc.1', private: true }))
  t.equal(packageVersion(join(installed, 'dist', 'src', 'cli-kit', 'version.js')), '1.2.3-rc.1', "the package's own, not the project's above it")
  writeFileSync(join(installed, 'package.json'), '{"name":"')
  t.throws(() => packageVersion(join(installed, 'dist', 'src', 'cli-kit', 'version.js')), /no package\.json of discord-pxe-controller above/, 'a broken file is not taken for ours')
  writeFileSync(join(installed, 'package.json'), JSON.stringify({ name: PACKAGE_NAME, version: 'latest' }))
  t.throws(() => packageVersion(join(installed, 'dist', 'src', 'cli-kit', 'version.js')), /"version" is not a semantic version/)
})

t.test('a closed stdout ends the process with 0; a closed stderr is dropped; other errors are thrown', async (t) => {
  const stdout = new EventEmitter()
  const stderr = new EventEmitter()
  const exits: number[] = []
  endQuietlyOnClosedPipe({ stdout, stderr }, (status) => exits.push(status))
  const epipe = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' })
  stderr.emit('error', epipe)
  t.same(exits, [], 'stderr: the process goes on, to end with its own status')
  stdout.emit('error', epipe)
  t.same(exits, [CLOSED_PIPE_EXIT])
  t.equal(CLOSED_PIPE_EXIT, 0)
  const other = Object.assign(new Error('write EIO'), { code: 'EIO' })
  t.throws(() => stdout.emit('error', other), /EIO/, 'not the reader leaving: thrown as before')
  t.throws(() => stderr.emit('error', other), /EIO/)
})
