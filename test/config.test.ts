// The config file: every bad key is named, relative paths resolve against the file, key modes checked.
import t from 'tap'
import { chmodSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { ConfigError, loadConfig, parseConfig } from '../src/config.js'
import { withEdit } from './support/with-edit.js'
import { testDir } from './support/test-dir.js'

const good = {
  listen: { host: '0.0.0.0', port: 8443 },
  tls: { ca: 'ca.pem', cert: 'server.pem', key: 'server-key.pem', crl: 'crl.pem' },
  plan_keys: 'plan-keys.json',
  state_dir: 'state',
  audit_log: 'audit.log',
  controller_id: 'pxe-controller-1',
  total_shards: 64,
  max_concurrency: 16,
  lease_seconds: 30,
  identify_interval_ms: 5100,
}

const DEFAULT_HANDOFF = { allowedHosts: ['gateway.discord.gg', '*.discord.gg'], ttlSeconds: 60 }

t.test('a good config resolves relative paths against the file folder', async (t) => {
  const c = parseConfig(good, '/etc/pxe')
  t.equal(c.tls.crl, '/etc/pxe/crl.pem')
  t.equal(c.planKeys, '/etc/pxe/plan-keys.json')
  t.same(c.settings, { totalShards: 64, maxConcurrency: 16, leaseSeconds: 30, identifyIntervalMs: 5100, dailyIdentifyLimit: null, sessionHandoff: DEFAULT_HANDOFF })
  t.ok(Object.isFrozen(c))
  const defaults = parseConfig({ ...good, max_concurrency: undefined, lease_seconds: undefined, identify_interval_ms: undefined, controller_id: undefined }, '/x')
  t.equal(defaults.settings.leaseSeconds, 30)
  t.equal(defaults.settings.identifyIntervalMs, 5100)
  t.equal(defaults.settings.maxConcurrency, 1)
  t.ok(defaults.controllerId.length > 0, 'controller_id defaults to the host name')
})

t.test('each bad key is named in the error', async (t) => {
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['unknown top-level key', { ...good, colour: 'blue' }, /unknown key "colour"/],
    ['unknown nested key', { ...good, tls: { ...good.tls, pass: 'x' } }, /unknown key "tls\.pass"/],
    ['missing total_shards', { ...good, total_shards: undefined }, /key "total_shards"/],
    ['total_shards 0', { ...good, total_shards: 0 }, /key "total_shards"/],
    ['total_shards 65537', { ...good, total_shards: 65537 }, /key "total_shards"/],
    ['total_shards not a multiple', { ...good, total_shards: 100, max_concurrency: 16 }, /key "total_shards": must be a multiple of max_concurrency/],
    ['total_shards fraction', { ...good, total_shards: 64.5 }, /key "total_shards"/],
    ['total_shards as string', { ...good, total_shards: '64' }, /key "total_shards"/],
    ['max_concurrency fraction', { ...good, max_concurrency: 1.5 }, /key "max_concurrency"/],
    ['max_concurrency 0', { ...good, max_concurrency: 0 }, /key "max_concurrency"/],
    ['max_concurrency 65537', { ...good, total_shards: 65536, max_concurrency: 65537 }, /key "max_concurrency"/],
    ['port out of range', { ...good, listen: { host: 'x', port: 70000 } }, /key "listen\.port"/],
    ['port as string', { ...good, listen: { host: 'x', port: '8443' } }, /key "listen\.port"/],
    ['lease_seconds 0', { ...good, lease_seconds: 0 }, /key "lease_seconds"/],
    ['identify interval below Discord window', { ...good, identify_interval_ms: 4999 }, /key "identify_interval_ms"/],
    ['daily limit 0', { ...good, daily_identify_limit: 0 }, /key "daily_identify_limit"/],
    ['empty crl path', { ...good, tls: { ...good.tls, crl: '' } }, /key "tls\.crl"/],
    ['missing plan_keys', { ...good, plan_keys: undefined }, /key "plan_keys"/],
    ['controller_id with spaces', { ...good, controller_id: 'a b' }, /key "controller_id"/],
    ['unknown planner', { ...good, planner: 'random' }, /key "planner"/],
  ]
  for (const [label, raw, pattern] of cases) {
    t.throws(() => parseConfig(raw, '/x'), ConfigError, label)
    try {
      parseConfig(raw, '/x')
    } catch (err) {
      t.match((err as Error).message, pattern, label)
    }
  }
})

/** `good` with the key at dotted `path` removed, or set to `value`. */
const edit = (path: string, ...value: [unknown?]) => withEdit(good, path, ...value)
const without = (path: string) => edit(path)

t.test('each required key, when missing or null, stops the parse with an error naming that key', async (t) => {
  const required = ['listen', 'listen.host', 'listen.port', 'tls', 'tls.ca', 'tls.cert', 'tls.key', 'tls.crl', 'plan_keys', 'state_dir', 'audit_log', 'total_shards']
  const all = [...required, 'max_concurrency', 'lease_seconds', 'identify_interval_ms', 'controller_id', 'daily_identify_limit']
  for (const key of required) {
    for (const [how, raw] of [
      ['missing', edit(key)],
      ['null', edit(key, null)],
    ] as const) {
      let message = ''
      try {
        parseConfig(raw, '/x')
        t.fail(`${key} ${how}: accepted`)
      } catch (err) {
        t.type(err, ConfigError, `${key} ${how}: a ConfigError`)
        message = (err as Error).message
      }
      t.match(message, `key "${key}"`, `${key} ${how}: the error names the key`)
      if (how === 'missing') t.match(message, `key "${key}": is required (expected `, `${key} missing: said so in plain words`)
      const others = all.filter((k) => k !== key && !key.startsWith(`${k}.`) && !k.startsWith(`${key}.`))
      t.notOk(others.some((k) => message.includes(`"${k}"`)), `${key} ${how}: the error names no other key (${message})`)
    }
  }
})

t.test('each optional key, when missing, takes its documented default', async (t) => {
  const at = (raw: Record<string, unknown>) => parseConfig(raw, '/x')
  t.equal(at(without('max_concurrency')).settings.maxConcurrency, 1, 'max_concurrency defaults to 1')
  t.equal(at({ ...without('max_concurrency'), total_shards: 7 }).settings.totalShards, 7, 'with max_concurrency defaulted to 1 any total_shards is a multiple')
  t.equal(at(without('lease_seconds')).settings.leaseSeconds, 30, 'lease_seconds defaults to 30')
  t.equal(at(without('identify_interval_ms')).settings.identifyIntervalMs, 5100, 'identify_interval_ms defaults to 5100')
  t.equal(at(without('controller_id')).controllerId, hostname(), 'controller_id defaults to the host name')
  t.equal(at(without('daily_identify_limit')).settings.dailyIdentifyLimit, null, 'no daily Identify budget unless set')
  t.equal(at({ ...good, daily_identify_limit: 1000 }).settings.dailyIdentifyLimit, 1000, 'daily_identify_limit when set')
  t.equal(at(good).settings.planner ?? 'contiguous', 'contiguous', 'the contiguous planner unless set')
  t.equal(at({ ...good, planner: 'stable' }).settings.planner, 'stable', 'planner when set')
  // Every default at once: the smallest valid file.
  const { max_concurrency: _m, lease_seconds: _l, identify_interval_ms: _i, controller_id: _c, ...minimal } = good
  t.same(at(minimal).settings, { totalShards: 64, maxConcurrency: 1, leaseSeconds: 30, identifyIntervalMs: 5100, dailyIdentifyLimit: null, sessionHandoff: DEFAULT_HANDOFF }, 'the smallest valid config')
})

t.test('session_handoff: defaults to Discord\'s gateway hosts and 60 s; every bad value named by key, nothing accepted', async (t) => {
  const at = (session_handoff: unknown) => parseConfig({ ...good, session_handoff }, '/x').settings.sessionHandoff
  t.same(at({}), DEFAULT_HANDOFF, 'an empty object takes both defaults')
  t.same(at({ allowed_hosts: ['127.0.0.1', 'gw.example.net', '*.example.net', '[::1]'], ttl_seconds: 300 }), {
    allowedHosts: ['127.0.0.1', 'gw.example.net', '*.example.net', '[::1]'],
    ttlSeconds: 300,
  })
  t.same(at({ allowed_hosts: [] }), { allowedHosts: [], ttlSeconds: 60 }, 'an empty list admits nothing: every deposit is refused')
  const bad: [unknown, RegExp, string][] = [
    [{ ttl_seconds: 0 }, /key "session_handoff\.ttl_seconds"/, 'a TTL of 0'],
    [{ ttl_seconds: 301 }, /key "session_handoff\.ttl_seconds"/, 'a TTL above 300'],
    [{ ttl_seconds: 1.5 }, /key "session_handoff\.ttl_seconds"/, 'a fractional TTL'],
    [{ allowed_hosts: ['*'] }, /key "session_handoff\.allowed_hosts\.0": "\*"/, 'a bare wildcard'],
    [{ allowed_hosts: ['*.gg'] }, /at least two labels/, 'a wildcard over a top-level domain'],
    [{ allowed_hosts: ['Gateway.Discord.gg'] }, /lower-case host name/, 'upper case'],
    [{ allowed_hosts: ['gateway.discord.gg:443'] }, /lower-case host name/, 'a port'],
    [{ allowed_hosts: ['wss://gateway.discord.gg'] }, /lower-case host name/, 'a URL instead of a host'],
    [{ allowed_hosts: ['*.*.discord.gg'] }, /wildcard/, 'two wildcards'],
    [{ allowed_hosts: 'gateway.discord.gg' }, /key "session_handoff\.allowed_hosts"/, 'a string instead of a list'],
    [{ ttl: 5 }, /unknown key "session_handoff\.ttl"/, 'an unknown key'],
    [null, /key "session_handoff"/, 'null'],
  ]
  for (const [value, message, what] of bad) t.throws(() => at(value), message, what)
})

t.test('loadConfig: not JSON, missing file, and private keys readable by others stop the start', async (t) => {
  const dir = testDir(t, {
    'ca.pem': 'x',
    'server.pem': 'x',
    'server-key.pem': 'x',
    'crl.pem': 'x',
    'plan-keys.json': '{}',
    'bad.json': '{"listen": ',
  })
  writeFileSync(join(dir, 'config.json'), JSON.stringify(good))
  chmodSync(join(dir, 'server-key.pem'), 0o600)
  chmodSync(join(dir, 'plan-keys.json'), 0o600)
  const ok = await loadConfig(join(dir, 'config.json'))
  t.equal(ok.tls.key, join(dir, 'server-key.pem'))
  await t.rejects(loadConfig(join(dir, 'bad.json')), /not valid JSON/)
  await t.rejects(loadConfig(join(dir, 'nope.json')), /cannot read config/)
  chmodSync(join(dir, 'server-key.pem'), 0o640)
  await t.rejects(loadConfig(join(dir, 'config.json')), /key "tls\.key": private key .* accessible by group or others \(mode 0640\)/)
  chmodSync(join(dir, 'server-key.pem'), 0o600)
  chmodSync(join(dir, 'plan-keys.json'), 0o604)
  await t.rejects(loadConfig(join(dir, 'config.json')), /key "plan_keys"/)
})

t.test('the ha section: parsed and resolved; state_dir optional with it; bad values named by key', async (t) => {
  const ha = { etcd: { endpoints: ['https://10.0.0.5:2379', 'https://10.0.0.6:2379'], ca: 'etcd/ca.pem', cert: 'etcd/client.pem', key: 'etcd/client-key.pem' } }
  const withHa = parseConfig({ ...without('state_dir'), ha }, '/etc/pxe')
  t.same(withHa.ha, { etcd: { ...ha.etcd, ca: '/etc/pxe/etcd/ca.pem', cert: '/etc/pxe/etcd/client.pem', key: '/etc/pxe/etcd/client-key.pem' }, prefix: '/pxe/', leaseTtlSeconds: 10, maxTxnOps: 128 })
  t.equal(withHa.stateDir, null, 'no state_dir: the state lives in etcd')
  t.equal(parseConfig({ ...without('state_dir'), ha: withEdit(ha, 'etcd.max_txn_ops', 4096) }, '/etc/pxe').ha?.maxTxnOps, 4096, 'max_txn_ops: the members\' --max-txn-ops')
  t.equal(parseConfig({ ...good, ha }, '/etc/pxe').stateDir, '/etc/pxe/state', 'a state_dir with ha is kept (read once to seed an empty etcd)')
  t.equal(parseConfig(good, '/x').ha, null, 'no ha: the file store')
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['no state_dir and no ha', without('state_dir'), /key "state_dir": is required \(expected string\) unless "ha" keeps the state in etcd/],
    ['an http endpoint', { ...good, ha: withEdit(ha, 'etcd.endpoints', ['http://10.0.0.5:2379']) }, /key "ha\.etcd\.endpoints\.0": must be an https:\/\/host:port URL/],
    ['no endpoints', { ...good, ha: withEdit(ha, 'etcd.endpoints', []) }, /key "ha\.etcd\.endpoints": must list at least one etcd endpoint/],
    ['no client key', { ...good, ha: withEdit(ha, 'etcd.key') }, /key "ha\.etcd\.key": is required/],
    ['a password', { ...good, ha: withEdit(ha, 'etcd.password', 'x') }, /unknown key "ha\.etcd\.password"/],
    ['a TTL of 1 s', { ...good, ha: { ...ha, lease_ttl_seconds: 1 } }, /key "ha\.lease_ttl_seconds"/],
    ['a prefix without slashes', { ...good, ha: { ...ha, prefix: 'pxe' } }, /key "ha\.prefix": must be a key prefix like \/pxe\//],
    ['an unknown key', { ...good, ha: { ...ha, ttl: 5 } }, /unknown key "ha\.ttl"/],
    ['max_txn_ops below 16', { ...good, ha: withEdit(ha, 'etcd.max_txn_ops', 8) }, /key "ha\.etcd\.max_txn_ops"/],
    ['max_txn_ops past 65,536', { ...good, ha: withEdit(ha, 'etcd.max_txn_ops', 100_000) }, /key "ha\.etcd\.max_txn_ops"/],
    ['max_txn_ops as a string', { ...good, ha: withEdit(ha, 'etcd.max_txn_ops', '4096') }, /key "ha\.etcd\.max_txn_ops"/],
    ['max_txn_ops not whole', { ...good, ha: withEdit(ha, 'etcd.max_txn_ops', 512.5) }, /key "ha\.etcd\.max_txn_ops"/],
    ['not an object', { ...good, ha: true }, /key "ha"/],
  ]
  for (const [label, raw, pattern] of cases) {
    try {
      parseConfig(raw, '/x')
      t.fail(`${label}: accepted`)
    } catch (err) {
      t.type(err, ConfigError, label)
      t.match((err as Error).message, pattern, label)
    }
  }
})

t.test('loadConfig: an ha client key readable by others stops the start', async (t) => {
  const dir = testDir(t, { 'server-key.pem': 'x', 'plan-keys.json': '{}', 'etcd-key.pem': 'x' })
  for (const f of ['server-key.pem', 'plan-keys.json']) chmodSync(join(dir, f), 0o600)
  chmodSync(join(dir, 'etcd-key.pem'), 0o644)
  const ha = { etcd: { endpoints: ['https://127.0.0.1:2379'], ca: 'ca.pem', cert: 'etcd.pem', key: 'etcd-key.pem' } }
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...good, ha }))
  await t.rejects(loadConfig(join(dir, 'config.json')), /key "ha\.etcd\.key": private key .* accessible by group or others \(mode 0644\)/)
})

t.test('ops: on loopback 9464 by default, null turns it off, non-loopback only with allow_remote', async (t) => {
  const at = (raw: Record<string, unknown>) => parseConfig(raw, '/x')
  t.same(at(good).ops, { host: '127.0.0.1', port: 9464, allowRemote: false }, 'the SPEC default')
  t.equal(at({ ...good, ops: null }).ops, null, '"ops": null turns it off')
  t.same(at({ ...good, ops: { port: 9100 } }).ops, { host: '127.0.0.1', port: 9100, allowRemote: false }, 'host defaults to loopback')
  for (const host of ['127.0.0.1', '127.8.9.10', '::1', 'localhost']) t.equal(at({ ...good, ops: { host } }).ops?.host, host, `${host} is loopback`)
  t.same(at({ ...good, ops: { host: '0.0.0.0', port: 9464, allow_remote: true } }).ops, { host: '0.0.0.0', port: 9464, allowRemote: true })
  const refused: [string, unknown, RegExp][] = [
    ['0.0.0.0 without allow_remote', { host: '0.0.0.0' }, /key "ops\.host": "0\.0\.0\.0" is not a loopback address.*"allow_remote": true/],
    ['a LAN address with allow_remote false', { host: '10.0.0.5', allow_remote: false }, /key "ops\.host": "10\.0\.0\.5" is not a loopback address/],
    ['::', { host: '::' }, /key "ops\.host"/],
    ['an unknown key', { host: '127.0.0.1', path: '/metrics' }, /unknown key "ops\.path"/],
    ['allow_remote as a string', { allow_remote: 'yes' }, /key "ops\.allow_remote"/],
    ['port out of range', { port: 65536 }, /key "ops\.port"/],
    ['the API port', { port: 8443 }, /key "ops\.port": must differ from listen\.port \(8443\)/],
    ['not an object', 9464, /key "ops"/],
  ]
  for (const [label, ops, pattern] of refused) t.throws(() => parseConfig({ ...good, ops }, '/x'), pattern, label)
})
