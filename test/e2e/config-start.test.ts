// The config rules through a real process start (`node dist/src/main.js --config FILE`): each bad config
// stops the start with a non-zero exit and a message naming the offending key, no stack trace, and nothing
// created (no state dir, no audit log). Every bad config is the good one with one edit, and the good one
// starts, so each refusal is due to that edit.
import t from 'tap'
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { makePki } from './harness.js'
import { runController, spawnController } from './process.js'
import { withEdit } from '../support/with-edit.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
for (const f of ['server-key.pem', 'plan-keys.json']) {
  const mode = statSync(join(pki.dir, f)).mode & 0o777
  if (mode !== 0o600) throw new Error(`setup: ${f} has mode ${mode.toString(8)}, expected 600`)
}

const good = {
  listen: { host: '127.0.0.1', port: 0 },
  tls: { ca: join(pki.dir, 'ca.pem'), cert: join(pki.dir, 'server.pem'), key: join(pki.dir, 'server-key.pem'), crl: join(pki.dir, 'crl.pem') },
  plan_keys: join(pki.dir, 'plan-keys.json'),
  state_dir: 'state',
  audit_log: 'audit.log',
  controller_id: 'config-start-test',
  total_shards: 64,
  max_concurrency: 16,
  ops: { host: '127.0.0.1', port: 0 }, // the default 9464 would collide between tests running in parallel
}

/** `good` with the key at dotted `path` removed, or set to `value`. */
const edit = (path: string, ...value: [unknown?]) => withEdit(good, path, ...value)

interface BadConfig {
  readonly label: string
  /** The config file's text, or a function of its folder (for copied key files). */
  readonly config: string | ((dir: string) => string)
  /** What stderr must say: the offending key, quoted as the controller quotes it. */
  readonly names: RegExp
}

const json = (c: unknown) => JSON.stringify(c, null, 2)
/** Copies a PKI file into the case folder with `mode`, and points `key` at the copy. */
const withCopy = (file: string, mode: number, key: string) => (dir: string) => {
  const copy = join(dir, file)
  copyFileSync(join(pki.dir, file), copy)
  chmodSync(copy, mode)
  return json(edit(key, copy))
}

const cases: BadConfig[] = [
  { label: 'unknown top-level key', config: json({ ...good, colour: 'blue' }), names: /unknown key "colour"/ },
  { label: 'unknown key in tls', config: json(edit('tls.passphrase', 'x')), names: /unknown key "tls\.passphrase"/ },
  { label: 'listen.port 70000', config: json(edit('listen.port', 70000)), names: /key "listen\.port"/ },
  { label: 'total_shards not a multiple of max_concurrency', config: json(edit('total_shards', 100)), names: /key "total_shards": must be a multiple of max_concurrency/ },
  { label: 'tls.ca missing', config: json(edit('tls.ca')), names: /key "tls\.ca"/ },
  { label: 'state_dir missing', config: json(edit('state_dir')), names: /key "state_dir"/ },
  { label: 'tls.key a path that does not exist', config: (dir) => json(edit('tls.key', join(dir, 'no-such-key.pem'))), names: /key "tls\.key": cannot read .*ENOENT/ },
  { label: 'tls.ca a path that does not exist', config: json(edit('tls.ca', 'no-such-ca.pem')), names: /key "tls\.ca": cannot read .*ENOENT/ },
  { label: 'tls.crl not a CRL of our CA', config: json(edit('tls.crl', join(pki.dir, 'ca.pem'))), names: /key "tls\.crl"/ },
  { label: 'ops on a non-loopback host without allow_remote', config: json(edit('ops.host', '0.0.0.0')), names: /key "ops\.host": "0\.0\.0\.0" is not a loopback address.*"allow_remote": true/ },
  { label: 'unknown key in ops', config: json(edit('ops.path', '/metrics')), names: /unknown key "ops\.path"/ },
  { label: 'not JSON', config: '{ "listen": { "host": "127.0.0.1", ', names: /is not valid JSON/ },
  { label: 'server key readable by the group (0640)', config: withCopy('server-key.pem', 0o640, 'tls.key'), names: /key "tls\.key": private key .* accessible by group or others \(mode 0640\)/ },
  { label: 'plan keys readable by everyone (0644)', config: withCopy('plan-keys.json', 0o644, 'plan_keys'), names: /key "plan_keys": private key .* accessible by group or others \(mode 0644\)/ },
]

t.test('each bad config stops the start naming its key, with no stack trace and nothing created', async (t) => {
  const start = async (c: (typeof cases)[number], i: number) => {
    const dir = join(root, 'bad', String(i))
    mkdirSync(dir, { recursive: true })
    const file = join(dir, 'controller.json')
    writeFileSync(file, typeof c.config === 'string' ? c.config : c.config(dir))
    const before = readdirSync(dir).sort()
    // cwd is the case folder too, so a path wrongly resolved against the cwd would also show up there.
    const run = await runController(['--config', file], dir, 60_000)
    return { c, dir, before, run }
  }
  // Three starts at a time: a dozen Node processes at once on a busy 2-core machine can take longer to
  // boot than the kill timer, which would then fail the test for the wrong reason.
  const runs: Awaited<ReturnType<typeof start>>[] = []
  for (let i = 0; i < cases.length; i += 3) runs.push(...(await Promise.all(cases.slice(i, i + 3).map((c, k) => start(c, i + k)))))
  for (const { c, dir, before, run } of runs) {
    t.not(run.code, 0, `${c.label}: non-zero exit`)
    t.match(run.stderr, c.names, `${c.label}: stderr names the key`)
    t.match(run.stderr, /^pxe-controller: /, `${c.label}: one clear message`)
    t.notMatch(run.stderr + run.stdout, /\n\s+at /, `${c.label}: no stack trace`)
    t.notMatch(run.stdout, /controller listening/, `${c.label}: never listened`)
    t.strictSame(readdirSync(dir).sort(), before, `${c.label}: nothing created (no state dir, no audit log)`)
  }
})

t.test('the good config starts, and creates its state dir and audit log', async (t) => {
  const dir = join(root, 'good')
  mkdirSync(dir)
  const file = join(dir, 'controller.json')
  writeFileSync(file, json(good))
  const ctl = await spawnController(['--config', file], dir)
  t.teardown(() => void ctl.child.kill('SIGKILL'))
  t.ok(ctl.port > 0, `listening on port ${ctl.port}`)
  // src/gc-tuning.ts: on Node 24 (V8 13) the process sets its one V8 flag, elsewhere it says why not
  if (process.versions.v8.startsWith('13.')) t.match(ctl.stdout(), /"v8Flag":"--external-memory-accounted-in-global-limit","setBy":"controller","msg":"V8 tuned for connection storms"/, 'V8 tuned, and logged')
  else t.match(ctl.stdout(), /"v8Flag":null,"reason":"V8 [^"]+: only V8 13 \(Node 24\) is tuned","msg":"V8 left at its defaults"/, 'V8 left at its defaults, and logged why')
  t.notMatch(ctl.stderr(), /unrecognized flag/, 'V8 refused no flag')
  ctl.child.kill('SIGTERM')
  t.equal(await ctl.exited, 0, 'stops cleanly on SIGTERM')
  t.ok(existsSync(join(dir, 'state')), 'state dir created next to the config')
  t.ok(existsSync(join(dir, 'audit.log')), 'audit log created next to the config')
  t.notMatch(ctl.stderr(), /\n\s+at /, 'no stack trace')

  // the operator's own flag on node's command line wins, and the log says so (Node 20 does not know the flag)
  if (process.versions.v8.startsWith('13.')) {
    const optOut = '--no-external-memory-accounted-in-global-limit'
    const own = await spawnController(['--config', file], dir, 60_000, [optOut])
    t.teardown(() => void own.child.kill('SIGKILL'))
    t.match(own.stdout(), new RegExp(`"v8Flag":"${optOut}","setBy":"operator"`), "the operator's flag, logged as theirs")
    t.notMatch(own.stderr(), /unrecognized flag|illegal value/, 'V8 refused no flag')
    own.child.kill('SIGTERM')
    t.equal(await own.exited, 0, 'stops cleanly')
  }
})
