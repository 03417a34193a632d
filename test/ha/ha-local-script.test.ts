// deploy/ha-local.sh: starts a 3-member etcd cluster with mutual TLS that our client can use, prints the
// "ha" config section, starts two controllers on it with a development PKI made by our toolkit (one
// leads, the other answers 503 not_leader naming it), starts a killed controller again on SIGUSR1 (it
// joins as a follower), and stops everything on SIGTERM. The controllers log only JSON lines, and no
// DEP0123: the "ha" section names the certificates' DNS name for SNI.
import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { connectEtcd } from '../../src/ha/etcd-client.js'
import { haConfigSchema, resolveHaConfig } from '../../src/ha/ha-config.js'
import { exited, needsEtcd, processAlive, spawnGuarded } from '../support/etcd-cluster.js'
import { checkinBody, request, type Reply } from '../e2e/harness.js'
import { until } from './replica.js'
import { testDir } from '../support/test-dir.js'

const SCRIPT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'deploy', 'ha-local.sh')

const portFree = (port: number) =>
  new Promise<boolean>((done) => {
    const server = createServer()
    server.once('error', () => done(false))
    server.listen(port, '127.0.0.1', () => server.close(() => done(true)))
  })

/**
 * A base port whose derived ports (etcd clients BASE+1..3, peers BASE+11..13, controllers BASE+21..22,
 * ops BASE+31..32) are free now. Below Linux's ephemeral range (32768 and up): there, the outgoing
 * connections and listen(0) servers of the tests running beside this one take ports at any moment, and
 * a member that lost its port to one of them left a cluster of two that still reported itself ready.
 */
async function freeBase(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const base = 10000 + Math.floor(Math.random() * 22700)
    const ports = [1, 2, 3, 11, 12, 13, 21, 22, 31, 32].map((d) => base + d)
    if ((await Promise.all(ports.map(portFree))).every(Boolean)) return base
  }
  throw new Error('no free port range found')
}


t.test('ha-local.sh runs a 3-member TLS etcd cluster and two controllers on it, and stops them', needsEtcd(), async (t) => {
  const dir = testDir(t)
  const base = await freeBase()
  const script = spawnGuarded('bash', [SCRIPT, dir], { env: { ...process.env, PXE_ETCD_BASE_PORT: String(base) } })
  t.teardown(async () => {
    script.kill('SIGTERM')
    await exited(script)
  })
  let out = ''
  script.stdout!.on('data', (d: Buffer) => (out += d.toString()))
  script.stderr!.on('data', (d: Buffer) => (out += d.toString()))
  await until(() => out.includes('Ctrl-C stops the controllers') || script.exitCode !== null, 60_000, 'the script reports the controllers ready').catch((err: Error) => {
    throw new Error(`${err.message}\n${out}`)
  })
  t.match(out, /etcd cluster of 3 members ready/)
  const line = out.split('\n').find((l) => l.startsWith('{"etcd"'))!
  const ha = resolveHaConfig(haConfigSchema.parse(JSON.parse(line)), dir)
  t.equal(ha.etcd.endpoints.length, 3, 'the printed "ha" section is a valid config with three endpoints')
  for (const endpoint of ha.etcd.endpoints) {
    const client = await connectEtcd({ ...ha.etcd, endpoints: [endpoint] })
    const res = await client.txn({ compare: [], success: [{ type: 'put', key: '/pxe-local/k', value: endpoint }] })
    t.ok(res.succeeded, `member ${endpoint} serves over mTLS`)
    client.close()
  }
  // the controllers: one leads (after its first campaign), the other names it
  const bundleDir = join(dir, 'pki', 'bundles', 'local-node-1')
  const node = { cert: readFileSync(join(bundleDir, 'cert.pem'), 'utf8'), key: readFileSync(join(bundleDir, 'key.pem'), 'utf8') }
  const ca = readFileSync(join(bundleDir, 'ca.pem'), 'utf8')
  const checkIn = (port: number) => request(port, ca, node, '/v1/checkin', { body: checkinBody('local-node-1') })
  let answers: Reply[] = []
  await until(async () => {
    answers = await Promise.all([base + 21, base + 22].map(checkIn))
    return answers.map((a) => a.status).sort().join() === '200,503' && answers.some((a) => a.json.error === 'not_leader')
  }, 30_000, 'one controller serves, the other names it').catch((err: Error) => {
    throw new Error(`${err.message}: ${answers.map((a) => a.text).join(' | ')}`)
  })
  t.match(answers.find((a) => a.status === 503)!.json.message, /the leader is pxe-local-[12]$/, 'the follower names the leader')
  t.match(out, /pxe-node --bundle .*local-node-1 --controller https:\/\/127\.0\.0\.1:\d+,https:\/\/127\.0\.0\.1:\d+/, 'it prints the agent command with both controllers')
  t.equal(ha.etcd.serverName, 'localhost', 'the "ha" section names the DNS name of the etcd certificates')

  // kill -9 of the leader; the other takes over; SIGUSR1 starts the killed one again, as a follower
  const leaderIndex = answers.findIndex((a) => a.status === 200) + 1
  const other = 3 - leaderIndex
  const controllerPid = (i: number) => Number(readFileSync(join(dir, 'logs', `controller-${i}.pid`), 'utf8'))
  t.ok(out.includes(`kill -USR1 $(cat ${dir}/logs/ha-local.pid)`), 'it prints how to start a killed controller again')
  const killed = controllerPid(leaderIndex)
  process.kill(killed, 'SIGKILL')
  await until(async () => (await checkIn(base + 20 + other)).status === 200, 40_000, `controller ${other} takes over`)
  await until(() => existsSync(join(dir, 'logs', 'ha-local.pid')), 10_000, 'the script wrote its pid')
  process.kill(Number(readFileSync(join(dir, 'logs', 'ha-local.pid'), 'utf8')), 'SIGUSR1')
  await until(() => out.includes(`controller ${leaderIndex} started again`), 10_000, 'the script restarts the killed controller')
  t.not(controllerPid(leaderIndex), killed, 'a new process')
  let again: Reply | null = null
  await until(async () => {
    again = await checkIn(base + 20 + leaderIndex).catch(() => null)
    return again?.status === 503 && again.json.error === 'not_leader'
  }, 30_000, 'the restarted controller answers as a follower')
  t.match(again!.json.message, new RegExp(`the leader is pxe-local-${other}$`), 'the restarted controller follows the new leader')
  t.equal((await checkIn(base + 20 + other)).status, 200, 'the new leader still serves')

  for (const i of [1, 2]) {
    const log = readFileSync(join(dir, 'logs', `controller-${i}.log`), 'utf8')
    const plain = log.split('\n').filter((l) => l !== '' && !l.startsWith('{'))
    t.same(plain, [], `controller ${i} logs JSON lines only`)
    t.notMatch(log, /DEP0123/, `controller ${i}: no DEP0123 (SNI carries a DNS name)`)
  }
  const pids = [1, 2, 3].map((i) => Number(readFileSync(join(dir, 'logs', `m${i}.pid`), 'utf8')))
  pids.push(...[1, 2].map(controllerPid))
  script.kill('SIGTERM')
  await exited(script)
  t.match(out, /etcd stopped/)
  await until(() => pids.every((pid) => !processAlive(pid)), 10_000, 'every member and controller is gone')
  t.pass('SIGTERM stopped every member and both controllers')
})
