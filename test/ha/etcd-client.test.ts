// Opening the etcd client: unreadable or malformed PEM files and an exposed client key are refused before
// any connection, with messages that name the config key and the file.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { chmodSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { connectEtcd } from '../../src/ha/etcd-client.js'
import { testDir } from '../support/test-dir.js'

t.test('bad TLS material is refused with a clear message', async (t) => {
  const dir = testDir(t, { 'ca.pem': 'x', 'client.pem': 'x', 'junk.pem': 'not a pem' })
  const key = join(dir, 'client-key.pem')
  writeFileSync(key, 'x', { mode: 0o600 })
  const config = { endpoints: ['https://127.0.0.1:2379'], ca: join(dir, 'ca.pem'), cert: join(dir, 'client.pem'), key }
  await t.rejects(connectEtcd({ ...config, endpoints: [] }), /no endpoints/)
  await t.rejects(connectEtcd({ ...config, ca: join(dir, 'missing.pem') }), /key "ha\.etcd\.ca": cannot read the etcd CA certificate .*missing\.pem \(ENOENT\)/)
  await t.rejects(connectEtcd({ ...config, key: join(dir, 'nokey.pem') }), /ha\.etcd\.key.*cannot read/)
  chmodSync(key, 0o644)
  await t.rejects(connectEtcd(config), /ha\.etcd\.key.*accessible by group or others.*chmod 600/, 'a key readable by others')
  chmodSync(key, 0o600)

  // a real certificate and key, then one file at a time replaced by junk
  const good = { ca: join(dir, 'real.pem'), cert: join(dir, 'real.pem'), key: join(dir, 'real-key.pem') }
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', good.key, '-out', good.cert, '-days', '1', '-subj', '/CN=test'], { stdio: 'pipe' })
  chmodSync(good.key, 0o600)
  const junk = join(dir, 'junk.pem')
  await t.rejects(connectEtcd({ ...config, ...good, ca: junk }), /key "ha\.etcd\.ca": .*junk\.pem is not a CA certificate in PEM form/)
  await t.rejects(connectEtcd({ ...config, ...good, cert: junk }), /key "ha\.etcd\.cert": .*junk\.pem is not a certificate in PEM form/)
  await t.rejects(connectEtcd({ ...config, ...good, key }), /key "ha\.etcd\.key": .*client-key\.pem is not a private key in PEM form/)
  const client = await connectEtcd({ ...config, ...good })
  client.close()
  t.pass('good material opens a client (no connection is made until the first call)')
})
