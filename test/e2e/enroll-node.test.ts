// pxe-node --enroll as a real process (the compiled bin) against a real controller with its enrollment
// listener, the signer running in the test as the CA host's would: a node from nothing to running
// shards; a "reboot" (killed, started again with no state) re-enrolled under --reenroll allow, the old
// certificate revoked; --state-dir used again across a restart (no new enrollment); a bad token file, a
// token for another name pattern (denied: exit 3) and an unreachable listener (retried). No token secret
// and no key ever appears in what the processes print.
import t from 'tap'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { listCerts } from '../../pki/toolkit.js'
import { bundle, makePki, request } from './harness.js'
import { enrollController, TestSigner, token } from '../agent/enroll-support.js'
import { until, urlOf } from '../agent/support.js'
import { testDir } from '../support/test-dir.js'

const BIN = fileURLToPath(new URL('../../bin/pxe-node.js', import.meta.url))
if (!existsSync(fileURLToPath(new URL('../../dist/src/agent/cli.js', import.meta.url)))) throw new Error('dist/ is missing: run "npm run build" (npm test does it first)')

const root = testDir(t)
const pki = await makePki(root)
const caFile = join(pki.dir, 'ca.pem')
const ctl = await enrollController(pki, join(root, 'ctl'), { total_shards: 4, max_concurrency: 4 })
t.teardown(() => ctl.running.stop())
const enrollUrl = `https://127.0.0.1:${ctl.enrollPort}`
const signer = await TestSigner.create(pki, ctl.port)
t.teardown(() => signer.stop())
const op = await bundle(pki, 'ops', 'operator')
/** Everything every process printed, scanned for secrets at the end. */
const printed: string[] = []
const secrets: string[] = []

/** A token written to a 0600 file, as a PXE boot config would hand it over. */
async function tokenFile(label: string, names: string, extra: Record<string, unknown> = {}): Promise<string> {
  const text = await token(pki, { names, uses: 5, approve: 'auto', reenroll: 'allow', ...extra })
  secrets.push(text.split('.')[2]!)
  const path = join(root, `${label}.token`)
  writeFileSync(path, `${text}\n`, { mode: 0o600 })
  return path
}

interface Node {
  readonly child: ChildProcess
  readonly exited: Promise<number | string>
  out(): string
  err(): string
  /** The JSON log lines so far. */
  logs(): { level: number; msg: string; event?: string; [k: string]: unknown }[]
}

function startNode(args: string[]): Node {
  const child = spawn(process.execPath, [BIN, ...args, '--log-level', 'debug'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()))
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()))
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => {
    printed.push(out, err)
    resolve(code ?? signal ?? -1)
  }))
  t.teardown(() => void child.kill('SIGKILL'))
  const logs = () => out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
  return { child, exited, out: () => out, err: () => err, logs }
}

const nodeArgs = (name: string, tokenPath: string, started: string, extra: string[] = []) => [
  '--enroll', enrollUrl, '--token-file', tokenPath, '--name', name, '--ca-file', caFile, '--controller', urlOf(ctl.port),
  '--capacity', '2', '--on-start', `echo "$PXE_SHARD_ID" >> '${started}'`, ...extra,
]
const lines = (path: string) => (existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n').filter(Boolean) : [])
const inPlan = async (name: string) => (await request(ctl.port, pki.ca, op, '/v1/plan')).json.nodes.some((n: { node_id: string }) => n.node_id === name)

t.test('usage: --bundle and --enroll are exclusive; --enroll needs a token, a name and the CA file (exit 2)', async (t) => {
  const cases: [string[], RegExp][] = [
    [['--bundle', root, '--enroll', enrollUrl, '--token-env', 'T', '--name', 'a', '--ca-file', caFile, '--controller', urlOf(1)], /--bundle and --enroll are exclusive/],
    [['--enroll', enrollUrl, '--name', 'a', '--ca-file', caFile, '--controller', urlOf(1)], /--token-file FILE or --token-env VAR/],
    [['--enroll', enrollUrl, '--token-env', 'T', '--ca-file', caFile, '--controller', urlOf(1)], /--name NAME/],
    [['--enroll', enrollUrl, '--token-env', 'T', '--name', 'a/b', '--ca-file', caFile, '--controller', urlOf(1)], /--name may contain only/],
    [['--enroll', enrollUrl, '--token-env', 'T', '--name', 'a', '--controller', urlOf(1)], /--ca-file CA\.pem/],
    [['--bundle', root, '--state-dir', root, '--controller', urlOf(1)], /--state-dir needs --enroll/],
  ]
  for (const [args, message] of cases) {
    const res = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 30_000 })
    t.equal(res.status, 2, args.join(' '))
    t.match(res.stderr, message)
  }
})

t.test('a node enrolls from nothing (key in memory) and runs its shards', async (t) => {
  const started = join(root, 'a-started.txt')
  const node = startNode(nodeArgs('pxe-a', await tokenFile('a', 'pxe-*'), started))
  // the signer is not there yet: the node waits, saying so
  await until('a waiting line', () => node.logs().some((l) => /^waiting for the signer \(request [A-Za-z0-9_-]{22}, \d+ s\)$/.test(l.msg) && l.level === 30), 15_000)
  signer.start(200)
  await until('two shards started', () => lines(started).length === 2, 30_000)
  t.ok(node.logs().some((l) => l.msg === 'enrolled: certificate issued'))
  t.ok(node.logs().some((l) => l.event === 'plan_accepted'), 'its check-ins are accepted')
  t.ok(await inPlan('pxe-a'), 'the controller plans it')
  t.equal(signer.issued('enroll').filter((o) => o.name === 'pxe-a').length, 1)

  // a reboot: the process dies, a new one starts with nothing
  node.child.kill('SIGKILL')
  await node.exited
  const firstSerial = signer.issued('enroll').find((o) => o.name === 'pxe-a')!.issued.serial
  const again = startNode(nodeArgs('pxe-a', join(root, 'a.token'), started))
  await until('the second enrollment issued', () => signer.issued('enroll').filter((o) => o.name === 'pxe-a').length === 2, 20_000)
  const second = signer.issued('enroll').filter((o) => o.name === 'pxe-a')[1]!
  t.same(second.issued.supersedes, [firstSerial], '--reenroll allow: the new certificate supersedes the old one')
  const certs = await listCerts(pki.dir)
  t.ok(certs.find((c) => c.serial === firstSerial)?.status === 'revoked', 'the old certificate is revoked')
  await until('the rebooted node checks in', () => again.logs().some((l) => l.event === 'plan_accepted'), 20_000)
  await until('its shards started again', () => lines(started).length === 4, 30_000)
  again.child.kill('SIGTERM')
  t.equal(await again.exited, 0)
})

t.test('--state-dir: the identity is kept (key 0600) and used again after a restart, without a new enrollment', async (t) => {
  signer.start(200)
  const state = join(root, 'state-s')
  const started = join(root, 's-started.txt')
  const args = nodeArgs('pxe-s', await tokenFile('s', 'pxe-s*'), started, ['--state-dir', state])
  const first = startNode(args)
  await until('shards started', () => lines(started).length === 2, 30_000)
  first.child.kill('SIGTERM')
  t.equal(await first.exited, 0)
  t.equal(statSync(join(state, 'key.pem')).mode & 0o777, 0o600, 'key.pem is 0600')
  for (const file of ['cert.pem', 'ca.pem', 'plan-jwks.json']) t.ok(existsSync(join(state, file)), file)
  secrets.push(readFileSync(join(state, 'key.pem'), 'utf8').split('\n')[1]!)
  const issued = signer.issued().length

  const second = startNode(args)
  await until('shards started again', () => lines(started).length === 4, 30_000)
  t.ok(second.logs().some((l) => l.msg === 'using the identity kept in the state folder (no enrollment)'))
  t.notOk(second.logs().some((l) => l.msg === 'enrollment requested; waiting for the signer'), 'no enrollment request')
  t.equal(signer.issued().length, issued, 'nothing new signed')
  second.child.kill('SIGTERM')
  t.equal(await second.exited, 0)
})

t.test('a token file that holds no token: a clear error naming the file, not its content; exit 1', async (t) => {
  const path = join(root, 'bad.token')
  writeFileSync(path, 'pxe1.abcdefghij.too-short-to-be-a-secret\n', { mode: 0o600 })
  secrets.push('too-short-to-be-a-secret')
  const node = startNode(nodeArgs('pxe-b', path, join(root, 'b.txt')))
  t.equal(await node.exited, 1)
  t.match(node.err(), /^pxe-node: the token file .*bad\.token does not hold a token: the token secret is not 43 characters of base64url\n$/)
  const missing = startNode(nodeArgs('pxe-b', join(root, 'missing.token'), join(root, 'b.txt')))
  t.equal(await missing.exited, 1)
  t.match(missing.err(), /cannot read the token file .*missing\.token \(ENOENT\)/)
})

t.test('a token for another name pattern: the signer denies it, the node exits 3 with the reason', async (t) => {
  signer.start(200)
  const node = startNode(nodeArgs('pxe-x', await tokenFile('x', 'other-*'), join(root, 'x.txt')))
  t.equal(await node.exited, 3)
  t.match(node.err(), /^pxe-node: enrollment denied: the name is outside the token's pattern \(other-\*\)\n$/)
})

t.test('an unreachable enrollment listener: a clear warning, retried with backoff, a signal ends the wait (exit 0)', async (t) => {
  const args = nodeArgs('pxe-u', await tokenFile('u', 'pxe-*'), join(root, 'u.txt'))
  args[1] = 'https://127.0.0.1:1'
  const node = startNode(args)
  await until('two retries', () => node.logs().filter((l) => l.msg === 'enrollment step failed; retrying').length >= 2, 15_000)
  const warns = node.logs().filter((l) => l.msg === 'enrollment step failed; retrying')
  t.equal(warns[0]!.level, 40, 'at warn')
  t.match(String(warns[0]!.err), /no enrollment listener answered: https:\/\/127\.0\.0\.1:1 ECONNREFUSED/)
  t.ok(Number(warns[1]!.retry_in_ms) > Number(warns[0]!.retry_in_ms), 'backoff')
  node.child.kill('SIGTERM')
  t.equal(await node.exited, 0)
})

t.test('no token secret and no private key in anything the processes printed', async (t) => {
  await signer.stop()
  const all = printed.join('\n')
  t.ok(all.length > 1000, 'the logs were collected')
  for (const secret of secrets) t.notOk(all.includes(secret), 'a token secret or key is not printed')
  t.notOk(all.includes('PRIVATE KEY'), 'no PEM private key')
  t.same(signer.errors, [])
})
