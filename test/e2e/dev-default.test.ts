// The embedded default: from an empty var/, `npm start` makes a dev PKI, listens on loopback only,
// and the curl command it prints checks in successfully.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { chmodSync, existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { runController, spawnController } from './process.js'
import { testDir } from '../support/test-dir.js'

t.test('starts from an empty var/ and the printed curl command succeeds', async (t) => {
  const cwd = testDir(t, {})
  const ctl = await spawnController(['--port', '0'], cwd, 90_000)
  t.teardown(() => void ctl.child.kill('SIGKILL'))
  await new Promise((r) => setTimeout(r, 200)) // the curl block is printed right after the ready line
  const block = /^curl [\s\S]*?\/v1\/checkin$/m.exec(ctl.stdout())
  t.ok(block, 'a curl command is printed')
  t.match(ctl.stdout(), /server listening at https:\/\/127\.0\.0\.1:\d+ \(mutual TLS\)/, 'the log says https')
  t.notMatch(ctl.stdout(), /listening at http:\/\//, 'never plain http')
  t.match(block![0], `https://127.0.0.1:${ctl.port}/v1/checkin`)
  const answer = execFileSync('bash', ['-c', block![0].replace(/^curl /, 'curl -sS --fail-with-body ')], { cwd, encoding: 'utf8' })
  const json = JSON.parse(answer)
  t.match(json, { generation: 1, total_shards: 16, range_start: 0, range_count: 16 })
  t.type(json.plan_jws, 'string')
  // The ops endpoint: on loopback too, on a free port with --port 0, and its printed command works.
  const metricsCommand = /^curl http:\/\/127\.0\.0\.1:(\d+)\/metrics$/m.exec(ctl.stdout())
  t.ok(metricsCommand, 'a metrics command is printed')
  t.equal(Number(metricsCommand![1]), ctl.opsPort)
  t.match(execFileSync('bash', ['-c', `${metricsCommand![0].replace(/^curl /, 'curl -sS --fail ')}`], { encoding: 'utf8' }), /^pxe_plan_generation 1$/m)
  // Enrollment: the printed commands name the enrollment listener, which serves on loopback.
  const enrollCommand = /^node bin\/pxe-node\.js --enroll https:\/\/127\.0\.0\.1:(\d+) /m.exec(ctl.stdout())
  t.ok(enrollCommand, 'the enrollment commands are printed')
  t.match(ctl.stdout(), /^node bin\/pxe-pki\.js signer --once --dir \S+ --controller https:\/\/127\.0\.0\.1:\d+ --bundle \S+dev-signer$/m)
  const enrollAnswer = execFileSync('curl', ['-sS', '--cacert', join(cwd, 'var', 'pki', 'ca.pem'), `https://127.0.0.1:${enrollCommand![1]}/v1/enroll/AAAAAAAAAAAAAAAAAAAAAA`], { encoding: 'utf8' })
  t.match(JSON.parse(enrollAnswer), { error: 'not_found' }, 'the enrollment listener answers without a client certificate')
  t.equal(statSync(join(cwd, 'var', 'pki', 'ca-key.pem')).mode & 0o777, 0o600)
  t.ok(existsSync(join(cwd, 'var', 'audit.log')))
  ctl.child.kill('SIGTERM')
  t.equal(await ctl.exited, 0, 'SIGTERM stops it cleanly')

  // A second start reuses the PKI (no new CA) and keeps the plan.
  const ca1 = statSync(join(cwd, 'var', 'pki', 'ca.pem')).mtimeMs
  const again = await spawnController(['--port', '0'], cwd, 60_000)
  t.notMatch(again.stdout(), /creating a development CA/)
  t.equal(statSync(join(cwd, 'var', 'pki', 'ca.pem')).mtimeMs, ca1)
  again.child.kill('SIGTERM')
  await again.exited

  // The key-mode rule holds in development too: a group-readable key stops the start.
  const serverKey = join(cwd, 'var', 'pki', 'server-key.pem')
  chmodSync(serverKey, 0o640)
  const refused = await runController(['--port', '0'], cwd)
  t.equal(refused.code, 1)
  t.match(refused.stderr, /key "tls\.key": private key .*server-key\.pem is accessible by group or others \(mode 0640\)/)
  chmodSync(serverKey, 0o600)
})

t.test('development mode refuses a non-loopback address, and bad flags', async (t) => {
  const cwd = testDir(t, {})
  const res = await runController(['--host', '0.0.0.0', '--port', '0'], cwd)
  t.equal(res.code, 2, 'a bad value is a usage error (exit 2)')
  t.match(res.stderr, /loopback only; refusing host "0\.0\.0\.0"/)
  t.notOk(existsSync(join(cwd, 'var')), 'nothing created')
  const bad = await runController(['--frobnicate'], cwd)
  t.equal(bad.code, 2, 'an unknown flag is a usage error (exit 2)')
  t.match(bad.stderr, /^pxe-controller: unknown option --frobnicate\nRun "pxe-controller --help" for usage\.\n$/)
  const help = await runController(['--help'], cwd)
  t.equal(help.code, 0)
  t.match(help.stdout, /Usage: pxe-controller/)
})
