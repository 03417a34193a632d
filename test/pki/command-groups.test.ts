// The command groups of pxe-pki (token, enroll): help for the group and for each command in it (exit 0, every
// flag its parser accepts listed with what it does), did-you-mean inside a group, usage errors exit 2, and
// token create | list | revoke through the CLI: printed once on stdout, never listed with its secret.
import t from 'tap'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../../pki/cli-main.js'
import { GROUPS, optionDefs } from '../../pki/commands.js'
import { initPki } from '../../pki/toolkit.js'
import { parseToken } from '../../src/core/enroll-token.js'
import { fingerprint } from './helpers.js'

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = ''
  let err = ''
  const code = await runCli(args, { out: (s) => (out += `${s}\n`), err: (s) => (err += `${s}\n`) })
  return { code, out, err }
}

for (const [group, spec] of Object.entries(GROUPS)) {
  t.test(`${group}: the group's help names every command`, async (t) => {
    for (const args of [[group, '--help'], [group, '-h'], [group, 'help'], ['help', group]]) {
      const { code, out } = await cli(args)
      t.equal(code, 0, args.join(' '))
      t.match(out, new RegExp(`^usage: pxe-pki ${group} <`), args.join(' '))
      for (const name of Object.keys(spec.commands)) t.match(out, new RegExp(`\\n  ${group} ${name} +\\S`), `${args.join(' ')} lists ${name}`)
    }
    const bare = await cli([group])
    t.equal(bare.code, 2)
    t.match(bare.err, new RegExp(`"${group}" needs a command`))
  })
  for (const [name, command] of Object.entries(spec.commands)) {
    t.test(`${group} ${name} --help`, async (t) => {
      for (const args of [[group, name, '--help'], [group, 'help', name], ['help', group, name]]) {
        const { code, out } = await cli(args)
        t.equal(code, 0, args.join(' '))
        t.match(out, new RegExp(`^usage: pxe-pki ${group} ${name}`), args.join(' '))
      }
      const { out } = await cli([group, name, '--help'])
      const options = out.slice(out.indexOf('\noptions:\n'))
      const accepted = { ...optionDefs(command.options), dir: { type: 'string' }, help: { type: 'boolean' } }
      const listed = [...options.matchAll(/^ {2}(?:-h, )?--([a-z-]+)/gm)].map((m) => m[1]!)
      t.same([...listed].sort(), Object.keys(accepted).sort(), 'exactly the flags the parser takes')
      for (const line of options.split('\n').filter((l) => l.startsWith('  -'))) t.match(line, /--[a-z-]+( \S+)? +\S.{10,}/, 'each with what it does')
    })
  }
}

t.test('did-you-mean and usage errors inside a group: exit 2, one line', async (t) => {
  const typo = await cli(['token', 'crate'])
  t.equal(typo.code, 2)
  t.equal(typo.err, 'pxe-pki: error: unknown command "token crate" (did you mean "create"?); run "pxe-pki token --help" for the list\n')
  const flag = await cli(['token', 'create', '--name', 'a'])
  t.equal(flag.code, 2)
  t.match(flag.err, /unknown option --name for "token create" \(did you mean --names\?\); see "pxe-pki token create --help"/)
  t.match((await cli(['enroll', 'aprove'])).err, /did you mean "approve"/)
  t.match((await cli(['tokn'])).err, /did you mean "token"/)
})

t.test('token create | list | revoke through the CLI', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'pki-token-cli-'))
  t.teardown(() => rm(root, { recursive: true, force: true }))
  const dir = join(root, 'pki')
  await initPki(dir)
  const made = await cli(['token', 'create', '--names', 'rack7-*', '--uses', '3', '--ttl', '2h', '--cert-ttl', '10m', '--dir', dir])
  t.equal(made.code, 0, made.err)
  const token = made.out.trim()
  const { id, secret } = parseToken(token)
  t.match(made.err, new RegExp(`token ${id}: 3 enrollment\\(s\\) of names matching "rack7-\\*" until .*certificates live 10m`))
  t.notOk(made.err.includes(secret.toString('base64url')), 'stderr never shows the secret')
  const json = await cli(['token', 'create', '--names', 'x-*', '--approve', 'manual', '--reenroll', 'allow', '--json', '--dir', dir])
  t.match(JSON.parse(json.out), { token: /^pxe1\./, names: 'x-*', approve: 'manual', reenroll: 'allow', status: 'active' })
  const listed = await cli(['token', 'list', '--dir', dir])
  t.match(listed.out, new RegExp(`${id}\\s+active\\s+0?3/3`))
  const listedJson = await cli(['token', 'list', '--json', '--dir', dir])
  t.notOk(listedJson.out.includes(secret.toString('base64url')) || listed.out.includes(secret.toString('base64url')), 'list never shows a secret')
  t.equal((JSON.parse(listedJson.out) as unknown[]).length, 2)
  const before = await fingerprint(dir)
  const bad: [string[], number, RegExp][] = [
    [['token', 'create', '--dir', dir], 2, /missing --names PATTERN/],
    [['token', 'create', '--names', 'a b', '--dir', dir], 2, /invalid --names/],
    [['token', 'create', '--names', 'a', '--uses', '0', '--dir', dir], 2, /invalid --uses 0/],
    [['token', 'create', '--names', 'a', '--ttl', '3 days', '--dir', dir], 2, /invalid --ttl/],
    [['token', 'create', '--names', 'a', '--approve', 'yes', '--dir', dir], 2, /invalid --approve "yes": use auto or manual/],
    [['token', 'create', '--names', 'a', '--cert-days', '91', '--dir', dir], 2, /invalid --cert-days 91/],
    [['token', 'create', '--names', 'a', '--cert-days', '2', '--cert-ttl', '1h', '--dir', dir], 2, /not both/],
    [['token', 'revoke', '--dir', dir], 2, /needs the token id/],
    [['token', 'revoke', 'NOPE', '--dir', dir], 2, /invalid token id/],
    [['token', 'revoke', 'aaaaaaaaaa', '--dir', dir], 1, /no token aaaaaaaaaa/],
  ]
  for (const [args, code, message] of bad) {
    const res = await cli(args)
    t.equal(res.code, code, args.join(' '))
    t.match(res.err, message, args.join(' '))
  }
  t.same(await fingerprint(dir), before, 'bad input changed nothing')
  const revoked = await cli(['token', 'revoke', id, '--dir', dir])
  t.equal(revoked.code, 0)
  t.match(revoked.out, `revoked token ${id} (0 of 3 uses spent)`)
  t.match((await cli(['token', 'list', '--dir', dir])).out, new RegExp(`${id}\\s+revoked`))
  t.notOk((await readFile(join(dir, 'index.json'), 'utf8')).includes(secret.toString('base64url')), 'the index never holds a secret')
})
