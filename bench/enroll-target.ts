/**
 * Child process of the enrollment bench (bench/enroll-bench.ts): the real controller with its enrollment
 * listener, on 127.0.0.1, until its parent disconnects. It reports `{ port, enrollPort }` over IPC once it
 * listens and answers `'cpu'` with `process.cpuUsage()` (every thread of the process).
 *
 *   node dist/bench/enroll-target.js <root>     (the PKI is <root>/pki, made by the bench)
 */
import { join } from 'node:path'
import { pino } from 'pino'
import { parseConfig } from '../src/config.js'
import { startController } from '../src/runtime.js'

async function main(): Promise<void> {
  const root = process.argv[2]
  if (root === undefined) throw new Error('usage: enroll-target.js <root>')
  const pki = (name: string) => join(root, 'pki', name)
  const config = parseConfig(
    {
      listen: { host: '127.0.0.1', port: 0 },
      tls: { ca: pki('ca.pem'), cert: pki('server.pem'), key: pki('server-key.pem'), crl: pki('crl.pem') },
      plan_keys: pki('plan-keys.json'),
      state_dir: join(root, 'state'),
      audit_log: join(root, 'audit.log'),
      controller_id: 'bench-controller',
      total_shards: 4096,
      max_concurrency: 16,
      lease_seconds: 30,
      // Every simulated node connects from 127.0.0.1: the per-address limits are raised out of the way (the
      // buckets are still checked on every request); the per-token share and the total keep their defaults.
      rate_limits: { node: { per_second: 1_000_000, burst: 1_000_000 }, signer: { per_second: 1_000_000, burst: 1_000_000 } },
      max_connections_per_address: 100_000,
      enroll: { host: '127.0.0.1', port: 0, poll_after_ms: 1000, per_address: { per_second: 1_000_000, burst: 1_000_000 }, per_address_pending: 10_000, per_token_pending: 10_000 },
      ops: { host: '127.0.0.1', port: 0 },
    },
    root,
  )
  const running = await startController(config, { logger: pino({ level: 'warn', base: { service: 'pxe-controller' } }) })
  const send = process.send?.bind(process)
  if (!send) throw new Error('enroll-target must be started by the bench (IPC channel missing)')
  process.on('message', (msg: unknown) => {
    if (msg === 'cpu') send({ cpu: process.cpuUsage() })
  })
  send({ port: running.port, enrollPort: running.enrollPort })
  process.once('disconnect', () => {
    running.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    )
  })
}

main().catch((err: Error) => {
  process.stderr.write(`enroll-target: ${err.message}\n`)
  process.exit(1)
})
