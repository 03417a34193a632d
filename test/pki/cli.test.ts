import t from 'tap'
import { X509Certificate } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { readIndex } from '../../pki/toolkit.js'
import { openssl } from './helpers.js'
import { runCli, cliIn } from './run-cli.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const dir = join(root, 'pki')

const cli = (...args: string[]) => cliIn(dir, ...args)

t.test("the operator's walk-through: init, server-cert, issue, list, revoke, crl", async (t) => {
  t.match(await cli('init', '--ca-days', '365'), { code: 0, out: /created PKI/ })
  t.match(await cli('server-cert', '--dns', 'localhost,controller.lan', '--ip', '127.0.0.1', '--days', '30'), { code: 0, out: /issued server certificate [0-9a-f]{32}/ })
  const issued = await cli('issue', 'node-1', '--role', 'node', '--key-bits', '2048')
  t.match(issued, { code: 0, out: /issued node certificate ([0-9a-f]{32}); bundle .*bundles\/node-1/ })
  t.notMatch(issued.out, /PRIVATE KEY/)
  t.match(await cli('issue', 'ops.alice', '--role', 'operator', '--days', '7'), { code: 0 })

  const listed = await runCli(['list', '--json', '--dir', dir])
  t.equal(listed.code, 0, listed.stderr)
  const list = JSON.parse(listed.stdout) as Array<Record<string, string>>
  t.same(list.map((c) => [c.name, c.role, c.status]), [
    [list[0]!.name, 'ca', 'valid'], ['localhost', 'server', 'valid'], ['node-1', 'node', 'valid'], ['ops.alice', 'operator', 'valid'],
  ])
  t.same(Object.keys(list[2]!), ['serial', 'name', 'role', 'not_before', 'not_after', 'status'])

  t.match(await cli('revoke', 'node-1', '--reason', 'cessationOfOperation'), { code: 0, out: /revoked [0-9a-f]{32}; wrote CRL number 2/ })
  t.match(await cli('crl', '--crl-days', '3'), { code: 0, out: /wrote CRL number 3/ })
  t.match(await cli('list'), { code: 0, out: /revoked\s+node\s+\S+\s+node-1/ })
  const crl = await openssl(['crl', '-in', join(dir, 'crl.pem'), '-noout', '-text', '-CAfile', join(dir, 'ca.pem'), '-verify'])
  t.match(crl.out, /verify OK/)
  t.match(crl.out, /CRL Number:\s*3[\s\S]*Cessation Of Operation/)
  const ca = new X509Certificate(await readFile(join(dir, 'ca.pem')))
  t.equal((Date.parse(ca.validTo) - Date.parse(ca.validFrom)) / 86_400_000, 365)

  const history = (await readIndex(dir)).history.map((h) => h.command)
  t.same(history, ['init', 'server-cert', 'issue', 'issue', 'revoke', 'crl'], 'every command is recorded in the index')
})

t.test('revoke --out FILE: the fresh CRL also goes to FILE (the copy to push); --help says so', async (t) => {
  t.match(await cli('issue', 'node-2', '--role', 'node', '--key-bits', '2048'), { code: 0 })
  const out = join(root, 'to-push.pem')
  t.match(await cli('revoke', 'node-2', '--out', out), { code: 0, out: new RegExp(`wrote CRL number 4 to .*crl\\.pem and ${out}`) })
  t.equal(await readFile(out, 'utf8'), await readFile(join(dir, 'crl.pem'), 'utf8'), 'FILE holds the same CRL as <pki>/crl.pem')
  const crl = await openssl(['crl', '-in', out, '-noout', '-text', '-CAfile', join(dir, 'ca.pem'), '-verify'])
  t.match(crl.out, /verify OK/)
  t.match(crl.out, /CRL Number:\s*4/)
  t.match(await cli('revoke', 'node-2', '--out', join(root, 'again.pem')), { code: 1, err: /nothing to revoke/ })
  await t.rejects(readFile(join(root, 'again.pem')), 'a refused revoke writes no FILE')
  t.equal((await readIndex(dir)).history.at(-1)?.command, 'revoke')
  // A FILE that cannot be written (the stick is not mounted) refuses the revocation before it is recorded.
  t.match(await cli('issue', 'node-3', '--role', 'node', '--key-bits', '2048'), { code: 0 })
  const before = await readFile(join(dir, 'crl.pem'), 'utf8')
  const indexBefore = await readFile(join(dir, 'index.json'), 'utf8')
  t.match(await cli('revoke', 'node-3', '--out', join(root, 'no-such-folder', 'crl.pem')), { code: 1, err: /the folder .*no-such-folder does not exist; nothing was changed/ })
  t.match(await cli('revoke', 'node-3', '--out', root), { code: 1, err: /exists and is not a file; nothing was changed/ })
  t.equal(await readFile(join(dir, 'crl.pem'), 'utf8'), before, 'crl.pem unchanged')
  t.equal(await readFile(join(dir, 'index.json'), 'utf8'), indexBefore, 'the index unchanged: node-3 is not revoked')
  t.match(await cli('crl', '--out', join(root, 'no-such-folder', 'crl.pem')), { code: 1, err: /does not exist; nothing was changed/ })
  const help = await cli('revoke', '--help')
  t.match(help.out, /\[--out FILE\]/)
  t.match(help.out, /pxe-ctl crl push FILE/)
})

t.test('more usage errors exit 2 with one line', async (t) => {
  t.match(await cli('revoke'), { code: 2, err: /^pxe-pki: error: "revoke" needs a name or --serial HEX/ })
  t.match(await cli('revoke', 'node-1', '--reason', 'bored'), { code: 2, err: /invalid reason "bored"/ })
  t.match(await cli('issue', 'n', '--role', 'node', '--days', '12x'), { code: 2, err: /invalid --days "12x"/ })
  t.match(await cli('issue', 'n', '--role', 'node', '--key-bits', '1024'), { code: 2, err: /invalid key size 1024/ })
  t.match(await cli('issue', 'n', '--role', 'node', '--days', '400'), { code: 2, err: /would outlive the CA/ })
  t.match(await cli('server-cert'), { code: 2, err: /at least one --dns name or --ip address/ })
  t.match(await cli('server-cert', '--ip', '300.1.1.1'), { code: 2, err: /invalid IP address "300\.1\.1\.1"/ })
  t.match(await cli('plan-key', 'spin'), { code: 2, err: /only one is "rotate"/ })
  t.match(await cli('issue', 'n', '--role'), { code: 2, err: /option --role of "issue" needs a value/ })
})
