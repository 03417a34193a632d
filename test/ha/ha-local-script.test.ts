// deploy/ha-local.sh: starts a 3-member etcd cluster with mutual TLS that our client can use, prints the
// "ha" config section for controllers, and stops every member on SIGTERM.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { connectEtcd } from '../../src/ha/etcd-client.js'
import { haConfigSchema, resolveHaConfig } from '../../src/ha/ha-config.js'
import { exited, needsEtcd, processAlive, spawnGuarded } from '../support/etcd-cluster.js'
import { until } from './replica.js'

const SCRIPT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'deploy', 'ha-local.sh')

const portFree = (port: number) =>
  new Promise<boolean>((done) => {
    const server = createServer()
    server.once('error', () => done(false))
    server.listen(port, '127.0.0.1', () => server.close(() => done(true)))
  })

/** A base port whose six derived ports (clients BASE+1..3, peers BASE+11..13) are free now. */
async function freeBase(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const base = 20000 + Math.floor(Math.random() * 30000)
    const ports = [1, 2, 3, 11, 12, 13].map((d) => base + d)
    if ((await Promise.all(ports.map(portFree))).every(Boolean)) return base
  }
  throw new Error('no free port range found')
}


t.test('ha-local.sh runs a 3-member TLS etcd cluster and stops it', needsEtcd(), async (t) => {
  const dir = t.testdir()
  const script = spawnGuarded('bash', [SCRIPT, dir], { env: { ...process.env, PXE_ETCD_BASE_PORT: String(await freeBase()) } })
  t.teardown(async () => {
    script.kill('SIGTERM')
    await exited(script)
  })
  let out = ''
  script.stdout!.on('data', (d: Buffer) => (out += d.toString()))
  script.stderr!.on('data', (d: Buffer) => (out += d.toString()))
  await until(() => out.includes('Ctrl-C stops the cluster') || script.exitCode !== null, 30_000, 'the script reports the cluster ready').catch((err: Error) => {
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
  const pids = [1, 2, 3].map((i) => Number(readFileSync(join(dir, 'logs', `m${i}.pid`), 'utf8')))
  script.kill('SIGTERM')
  await exited(script)
  t.match(out, /etcd stopped/)
  await until(() => pids.every((pid) => !processAlive(pid)), 10_000, 'every member is gone')
  t.pass('SIGTERM stopped every member')
})
