// Every pxe-pki command's --help lists every flag its parser accepts, with what it does, and every flag
// the help lists is one the parser accepts (checked by parsing it together with --help, which runs nothing).
import t from 'tap'
import { runCli } from '../../pki/cli-main.js'
import { COMMANDS, optionDefs } from '../../pki/commands.js'

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = ''
  let err = ''
  const code = await runCli(args, { out: (s) => (out += `${s}\n`), err: (s) => (err += `${s}\n`) })
  return { code, out, err }
}

for (const [name, command] of Object.entries(COMMANDS)) {
  t.test(`${name} --help`, async (t) => {
    const { code, out } = await cli([name, '--help'])
    t.equal(code, 0)
    const options = out.slice(out.indexOf('\noptions:\n'))
    t.ok(options.length > 0, 'has an options section')
    const accepted = { ...optionDefs(command.options), ...(command.usesDir ? { dir: { type: 'string' } } : {}), help: { type: 'boolean' } }
    for (const [flag, def] of Object.entries(accepted)) {
      const line = options.split('\n').find((l) => l.trimStart().replace(/^-h, /, '').startsWith(`--${flag}${def.type === 'string' ? ' ' : ''}`))
      t.ok(line, `--${flag} is listed`)
      t.match(line ?? '', def.type === 'string' ? new RegExp(`--${flag} \\S+ +\\S.{10,}`) : new RegExp(`--${flag} +\\S.{10,}`), `--${flag}: its value and what it does`)
    }
    const listed = [...options.matchAll(/^ {2}(?:-h, )?--([a-z-]+)/gm)].map((m) => m[1]!)
    t.same([...listed].sort(), Object.keys(accepted).sort(), 'exactly the flags the parser takes')
    for (const flag of listed) {
      const value = accepted[flag as keyof typeof accepted]!.type === 'string' ? ['v'] : []
      const res = await cli([name, `--${flag}`, ...value, '--help'])
      t.equal(res.code, 0, `--${flag} is accepted: ${res.err}`)
    }
  })
}
