// Opening the etcd client: unreadable PEM files and an exposed client key are refused before any
// connection, with messages that name the file.
import t from 'tap'
import { chmodSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { connectEtcd } from '../../src/ha/etcd-client.js'

t.test('bad TLS material is refused with a clear message', async (t) => {
  const dir = t.testdir({ 'ca.pem': 'x', 'client.pem': 'x' })
  const key = join(dir, 'client-key.pem')
  writeFileSync(key, 'x', { mode: 0o600 })
  const config = { endpoints: ['https://127.0.0.1:2379'], ca: join(dir, 'ca.pem'), cert: join(dir, 'client.pem'), key }
  await t.rejects(connectEtcd({ ...config, endpoints: [] }), /no endpoints/)
  await t.rejects(connectEtcd({ ...config, ca: join(dir, 'missing.pem') }), /cannot read the CA certificate .*missing\.pem \(ENOENT\)/)
  await t.rejects(connectEtcd({ ...config, key: join(dir, 'nokey.pem') }), /ha\.etcd\.key.*cannot read/)
  chmodSync(key, 0o644)
  await t.rejects(connectEtcd(config), /ha\.etcd\.key.*accessible by group or others.*chmod 600/, 'a key readable by others')
})
