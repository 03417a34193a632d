import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { AuditLog } from '../../src/audit/audit-log.js'
import { runAuditVerify } from '../../src/audit/verify-file.js'
import { testDir } from '../support/test-dir.js'

/** Collects what a command writes. */
function sink(): { text: string; write(s: string): void } {
  return {
    text: '',
    write(s: string) {
      this.text += s
    },
  }
}

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out = sink()
  const err = sink()
  const code = await runAuditVerify(argv, out, err)
  return { code, out: out.text, err: err.text }
}

t.test('audit-verify: exit codes and output', async (t) => {
  const dir = testDir(t)
  const path = join(dir, 'audit.log')
  const log = await AuditLog.open(path)
  for (let i = 0; i < 5; i++) log.record('identify_granted', { node: 'node-a', shard: i })
  await log.close()

  t.same(await run([path]), { code: 0, out: 'ok: 5 lines, chain intact\n', err: '' })

  const lines = readFileSync(path, 'utf8').split('\n')
  const broken = join(dir, 'broken.log')
  writeFileSync(broken, [...lines.slice(0, 2), ...lines.slice(3)].join('\n'))
  const b = await run([broken])
  t.equal(b.code, 1)
  t.match(b.out, /^broken at line 3: seq is 4, expected 3/)

  const empty = join(dir, 'empty.log')
  writeFileSync(empty, '')
  t.same(await run([empty]), { code: 0, out: 'ok: 0 lines, chain intact\n', err: '' })

  const missing = await run([join(dir, 'nope.log')])
  t.same([missing.code, missing.out], [2, ''])
  t.match(missing.err, /cannot read .*nope\.log: ENOENT/)

  for (const argv of [[], [path, path], ['--help']]) {
    const u = await run(argv)
    t.same([u.code, u.out], [2, ''], `usage error for ${JSON.stringify(argv)}`)
    t.match(u.err, /usage: audit-verify <file>/)
  }
})
