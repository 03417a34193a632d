// The `ha` config section: defaults, resolution, and bad values refused with the key and the reason.
import t from 'tap'
import { haConfigSchema, resolveHaConfig } from '../../src/ha/ha-config.js'
import { withEdit } from '../support/with-edit.js'

const good = {
  etcd: { endpoints: ['https://10.0.0.5:2379', 'https://etcd-2.lan:2379', 'https://[fd00::7]:2379'], ca: 'etcd/ca.pem', cert: 'etcd/client.pem', key: 'etcd/client-key.pem' },
  prefix: '/pxe/',
  lease_ttl_seconds: 10,
}

t.test('a good section parses and resolves', async (t) => {
  const ha = resolveHaConfig(haConfigSchema.parse(good), '/etc/pxe-controller')
  t.same(ha.etcd.endpoints, good.etcd.endpoints)
  t.equal(ha.etcd.key, '/etc/pxe-controller/etcd/client-key.pem', 'relative PEM paths resolve against the config folder')
  t.equal(ha.leaseTtlSeconds, 10)
  const minimal = haConfigSchema.parse({ etcd: good.etcd })
  t.equal(minimal.prefix, '/pxe/', 'prefix defaults to /pxe/')
  t.equal(minimal.lease_ttl_seconds, 10, 'the lease TTL defaults to 10 s')
  t.ok(Object.isFrozen(ha.etcd), 'resolved config is frozen')
})

const bad: [string, string, unknown, RegExp][] = [
  ['plain http', 'etcd.endpoints', ['http://10.0.0.5:2379'], /https:\/\/host:port/],
  ['no port', 'etcd.endpoints', ['https://10.0.0.5'], /https:\/\/host:port/],
  ['a path', 'etcd.endpoints', ['https://10.0.0.5:2379/v3'], /https:\/\/host:port/],
  ['credentials in the URL', 'etcd.endpoints', ['https://root:pw@10.0.0.5:2379'], /https:\/\/host:port/],
  ['not a URL', 'etcd.endpoints', ['10.0.0.5:2379'], /https:\/\/host:port/],
  ['no endpoint', 'etcd.endpoints', [], /at least one/],
  ['an empty key path', 'etcd.key', '', /non-empty path/],
  ['a TTL of 1 s', 'lease_ttl_seconds', 1, /2/],
  ['a fractional TTL', 'lease_ttl_seconds', 2.5, /int/],
  ['a TTL over 300 s', 'lease_ttl_seconds', 301, /300/],
  ['a prefix without slashes', 'prefix', 'pxe', /key prefix like \/pxe\//],
  ['a prefix with a space', 'prefix', '/p x/', /key prefix/],
  ['the root prefix', 'prefix', '/', /key prefix/],
]

for (const [name, path, value, message] of bad) {
  t.test(`refused: ${name}`, async (t) => {
    const res = haConfigSchema.safeParse(withEdit(good, path, value))
    t.notOk(res.success)
    const issue = res.error!.issues[0]!
    t.match(issue.path.join('.'), path.split('.').slice(0, 2).join('.'), 'the issue names the key')
    t.match(issue.message, message)
  })
}

t.test('unknown and missing keys are refused', async (t) => {
  t.notOk(haConfigSchema.safeParse({ ...good, extra: 1 }).success, 'unknown key at the top')
  t.notOk(haConfigSchema.safeParse(withEdit(good, 'etcd.password', 'x')).success, 'unknown key in etcd (no password auth: mTLS only)')
  t.notOk(haConfigSchema.safeParse(withEdit(good, 'etcd.ca')).success, 'missing CA')
  t.notOk(haConfigSchema.safeParse({}).success, 'missing etcd')
})
