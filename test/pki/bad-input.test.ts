import t from 'tap'
import { writeFile, mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { initPki } from '../../pki/toolkit.js'
import { runCli as runCliInProcess } from '../../pki/cli-main.js'
import { COMMANDS } from '../../pki/commands.js'
import { fingerprint } from './helpers.js'
import { runCli } from './run-cli.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t, { foreign: { 'notes.txt': 'not a PKI' } })
const dir = join(root, 'pki')
const foreign = join(root, 'foreign')

t.before(async () => {
  await initPki(dir)
  await mkdir(join(root, 'csr'))
  await writeFile(join(root, 'csr', 'not-a-csr.pem'), 'hello, I am not a certificate request\n')
})

interface BadCase {
  readonly what: string
  readonly args: string[]
  readonly code: number
  readonly message: RegExp
  readonly watch?: string
}

const cases: BadCase[] = [
  { what: 'name ../evil', args: ['issue', '../evil', '--role', 'node'], code: 2, message: /invalid name "\.\.\/evil": must start with an ASCII letter or digit/ },
  { what: 'name with a space', args: ['issue', 'a b', '--role', 'node'], code: 2, message: /invalid name "a b": may contain only/ },
  { what: 'name -x', args: ['issue', '--role', 'node', '--', '-x'], code: 2, message: /invalid name "-x": must start with/ },
  { what: 'name of 65 characters', args: ['issue', 'n'.repeat(65), '--role', 'node'], code: 2, message: /must be at most 64 characters \(got 65\)/ },
  { what: 'name é', args: ['issue', 'é', '--role', 'node'], code: 2, message: /invalid name "\?+": must start with/ },
  { what: 'empty name', args: ['issue', '', '--role', 'node'], code: 2, message: /invalid name "": must not be empty/ },
  { what: 'unknown role', args: ['issue', 'node-1', '--role', 'admin'], code: 2, message: /invalid role "admin": use node, operator or signer/ },
  { what: 'missing role', args: ['issue', 'node-1'], code: 2, message: /missing --role/ },
  { what: 'unknown flag', args: ['issue', 'node-1', '--role', 'node', '--colour', 'red'], code: 2, message: /unknown option --colour for "issue"/ },
  { what: 'unknown command', args: ['destroy'], code: 2, message: /unknown command "destroy"/ },
  { what: 'missing PKI directory', args: ['issue', 'node-1', '--role', 'node', '--dir', join(root, 'missing')], code: 1, message: /PKI directory .*missing does not exist/ },
  { what: 'foreign directory', args: ['issue', 'node-1', '--role', 'node', '--dir', foreign], code: 1, message: /is not a PKI directory \(no index\.json\)/, watch: foreign },
  { what: 'a CSR that is not a CSR', args: ['sign-csr', join(root, 'csr', 'not-a-csr.pem'), '--role', 'node'], code: 1, message: /not a PEM certificate signing request/ },
  { what: 'unknown serial', args: ['revoke', '--serial', '0123ABCD'], code: 1, message: /no certificate with serial 123abcd was issued by this PKI/ },
  { what: 'init over an existing PKI', args: ['init'], code: 1, message: /already holds a PKI; init refuses to overwrite it/ },
  { what: 'serial that is not hex', args: ['revoke', '--serial', 'zz12'], code: 2, message: /invalid serial "zz12": expected hexadecimal digits/ },
  { what: 'serial of colons only', args: ['revoke', '--serial', '::'], code: 2, message: /invalid serial "::": expected hexadecimal digits/ },
  { what: 'revoke a name that breaks the rule', args: ['revoke', '../evil'], code: 2, message: /invalid name "\.\.\/evil"/ },
  { what: 'revoke a name never issued', args: ['revoke', 'never-issued'], code: 1, message: /nothing to revoke: no certificate was issued to "never-issued"/ },
  { what: 'sign-csr with an unknown role', args: ['sign-csr', join(root, 'csr', 'not-a-csr.pem'), '--role', 'admin'], code: 2, message: /invalid role "admin": use node, operator or signer/ },
  { what: 'sign-csr without a role', args: ['sign-csr', join(root, 'csr', 'not-a-csr.pem')], code: 2, message: /missing --role/ },
  { what: '--days 0', args: ['issue', 'node-1', '--role', 'node', '--days', '0'], code: 2, message: /invalid --days 0: expected a whole number of days from 1/ },
  { what: '--days=-1', args: ['issue', 'node-1', '--role', 'node', '--days=-1'], code: 2, message: /invalid --days "-1": expected a whole number/ },
  { what: 'server-cert with a bad DNS name', args: ['server-cert', '--dns', 'bad_host!'], code: 2, message: /invalid DNS name "bad_host!"/ },
]

/** Runs `tasks` two at a time: the machine is shared and each CLI start compiles TypeScript. */
async function pairwise<T>(tasks: Array<() => Promise<T>>): Promise<T[]> {
  const results: T[] = []
  for (let i = 0; i < tasks.length; i += 2) results.push(...(await Promise.all(tasks.slice(i, i + 2).map((f) => f()))))
  return results
}

t.test('each bad input: one clear stderr line, the exit code, and an unchanged PKI directory', async (t) => {
  const before = await fingerprint(dir)
  const foreignBefore = await fingerprint(foreign)
  const results = await pairwise(cases.map((c) => () => runCli(c.args.includes('--dir') ? c.args : [c.args[0]!, '--dir', dir, ...c.args.slice(1)])))
  for (const [i, c] of cases.entries()) {
    const res = results[i]!
    t.equal(res.code, c.code, `${c.what}: exit code`)
    t.match(res.stderr, /^pxe-pki: error: [^\n]+\n$/, `${c.what}: exactly one error line`)
    t.match(res.stderr, c.message, `${c.what}: message`)
    t.equal(res.stdout, '', `${c.what}: nothing on stdout`)
  }
  t.same(await fingerprint(dir), before, 'PKI directory unchanged (names, modes, SHA-256 of every file)')
  t.same(await fingerprint(foreign), foreignBefore, 'foreign directory unchanged (no lock file left in it)')
})

t.test('--help works for the CLI (spawned) and for every command', async (t) => {
  const res = await runCli(['--help'])
  t.equal(res.code, 0)
  for (const name of Object.keys(COMMANDS)) t.match(res.stdout, new RegExp(`\\n  ${name} `), `${name} is listed`)
  for (const name of Object.keys(COMMANDS)) {
    let out = ''
    const code = await runCliInProcess([name, '--help'], { out: (s) => (out += s), err: () => t.fail('no error expected') })
    t.equal(code, 0, `${name} --help`)
    t.match(out, new RegExp(`^usage: pxe-pki ${name}`))
    if (COMMANDS[name]!.usesDir) t.match(out, /--dir DIR/)
  }
})
