/**
 * Child process of the mTLS bench: serves one target on 127.0.0.1 until its parent disconnects.
 *
 *   node dist/bench/mtls-target.js controller <root> rsa|ec   the real controller (production code path)
 *   node dist/bench/mtls-target.js ceiling <root> rsa|ec      the ceiling: raw node:https + node:crypto
 *   node dist/bench/mtls-target.js controller-ha <root> rsa|ec <ha.json>   the controller on etcd (bench/ha-bench.ts)
 *
 * `rsa|ec` picks the server certificate (`<root>/pki/server-rsa.pem` or `server-ec.pem`, made by the
 * bench). Each target runs in its own process so that it owns one core and the load generator the
 * other; it reports `{ port }` over IPC once it listens, and answers `'cpu'` with `{ cpu }` =
 * `process.cpuUsage()` (every thread of the process) so the bench can measure CPU per request.
 */
import { constants, sign } from 'node:crypto'
import { readFileSync } from 'node:fs'
import https from 'node:https'
import { join } from 'node:path'
import { pino } from 'pino'
import { parseConfig } from '../src/config.js'
import { tuneGarbageCollection } from '../src/gc-tuning.js'
import { buildSecureContextOptions } from '../src/identity/tls-crl.js'
import { startController } from '../src/runtime.js'
import { loadPlanKeys } from '../src/signing/plan-keys.js'
import { PLAN_JWS_TYPE } from '../src/signing/plan-signer.js'
import type { ServerKey } from './mtls-process.js'
import { BENCH_LEASE_SECONDS, BENCH_MAX_CONCURRENCY, BENCH_NODES, BENCH_RATE_LIMITS, BENCH_TOTAL_SHARDS, benchNodeIndex } from './mtls-shared.js'

/** The files both targets use, all under `<root>/pki` (made by the bench with our toolkit). */
function pkiFile(root: string, name: string): string {
  return join(root, 'pki', name)
}

/** The server certificate and key of one key type, under `<root>/pki`. */
function serverFiles(root: string, key: ServerKey): { cert: string; key: string } {
  return { cert: pkiFile(root, `server-${key}.pem`), key: pkiFile(root, `server-${key}-key.pem`) }
}

/**
 * The real controller: on the file store, or with `haFile` (a JSON file holding an `ha` config section)
 * as the only replica of an HA deployment on that etcd, under a prefix of its own.
 */
async function startRealController(root: string, key: ServerKey, haFile?: string): Promise<{ port: number; stop: () => Promise<void> }> {
  const server = serverFiles(root, key)
  const ha = haFile === undefined ? undefined : { ...(JSON.parse(readFileSync(haFile, 'utf8')) as object), prefix: `/pxe-bench-${process.pid}/` }
  const config = parseConfig(
    {
      listen: { host: '127.0.0.1', port: 0 },
      tls: { ca: pkiFile(root, 'ca.pem'), cert: server.cert, key: server.key, crl: pkiFile(root, 'crl.pem') },
      plan_keys: pkiFile(root, 'plan-keys.json'),
      ...(ha === undefined ? { state_dir: join(root, `state-${key}`) } : { ha }),
      audit_log: join(root, ha === undefined ? `audit-${key}.log` : `audit-ha-${key}.log`),
      controller_id: 'bench-controller',
      total_shards: BENCH_TOTAL_SHARDS,
      max_concurrency: BENCH_MAX_CONCURRENCY,
      lease_seconds: BENCH_LEASE_SECONDS,
      rate_limits: BENCH_RATE_LIMITS,
      // Metrics stay on, as in production (a free port, so nothing else on the box collides).
      ops: { host: '127.0.0.1', port: 0 },
    },
    root,
  )
  // The production logger (main.ts) at its production level; the parent discards stdout.
  const running = await startController(config, { logger: pino({ level: 'info', base: { service: 'pxe-controller' } }) })
  // an HA replica serves once it leads and has loaded the state
  while (!running.host.isLeader()) await new Promise((resolve) => setTimeout(resolve, 50))
  return { port: running.port, stop: () => running.stop() }
}

const b64url = (text: string): string => Buffer.from(text, 'utf8').toString('base64url')

/**
 * The ceiling: the same TLS settings and the same answer shape, with nothing but JSON.parse, a plan
 * lookup and an Ed25519 signature by node:crypto (key object made once) per request.
 */
async function startCeiling(root: string, key: ServerKey): Promise<{ port: number; stop: () => Promise<void> }> {
  const files = serverFiles(root, key)
  const keys = await loadPlanKeys(pkiFile(root, 'plan-keys.json'))
  const header = b64url(JSON.stringify({ alg: 'EdDSA', typ: PLAN_JWS_TYPE, kid: keys.kid }))
  const perNode = BENCH_TOTAL_SHARDS / BENCH_NODES
  const server = https.createServer(
    {
      ...buildSecureContextOptions({
        ca: readFileSync(pkiFile(root, 'ca.pem')),
        cert: readFileSync(files.cert),
        key: readFileSync(files.key),
        crlPem: readFileSync(pkiFile(root, 'crl.pem')),
      }),
      secureOptions: constants.SSL_OP_NO_RENEGOTIATION | constants.SSL_OP_NO_COMPRESSION,
      requestCert: true,
      rejectUnauthorized: true,
      keepAliveTimeout: 65_000,
    },
    (req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        let body: unknown
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        } catch {
          res.writeHead(400).end()
          return
        }
        const field = typeof body === 'object' && body !== null ? (body as { node_id?: unknown }).node_id : undefined
        const nodeId = typeof field === 'string' ? field : ''
        const index = benchNodeIndex(nodeId)
        if (req.method !== 'POST' || req.url !== '/v1/checkin' || index < 0) {
          res.writeHead(400).end()
          return
        }
        const rangeStart = index * perNode
        const assigned = Array.from({ length: perNode }, (_, i) => rangeStart + i)
        const iat = Math.floor(Date.now() / 1000)
        const plain = { generation: 1, total_shards: BENCH_TOTAL_SHARDS, assigned, range_start: rangeStart, range_count: perNode, lease_seconds: BENCH_LEASE_SECONDS, max_concurrency: BENCH_MAX_CONCURRENCY }
        const payload = b64url(JSON.stringify({ iss: 'bench-ceiling', sub: nodeId, iat, exp: iat + BENCH_LEASE_SECONDS, ...plain }))
        const signature = sign(null, Buffer.from(`${header}.${payload}`), keys.privateKey).toString('base64url')
        const text = JSON.stringify({ ...plain, plan_jws: `${header}.${payload}.${signature}` })
        res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) }).end(text)
      })
    },
  )
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  return {
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

async function main(): Promise<void> {
  // The controller's process sets this at its start (main.ts); the ceiling gets it too, so that the
  // ratio between them compares their code, not their V8 settings.
  tuneGarbageCollection()
  const [kind, root, key, haFile] = process.argv.slice(2)
  if (!root || !(kind === 'controller' || kind === 'ceiling' || (kind === 'controller-ha' && haFile)) || (key !== 'rsa' && key !== 'ec')) {
    process.stderr.write('usage: mtls-target.js controller|ceiling <root> rsa|ec | controller-ha <root> rsa|ec <ha.json>\n')
    process.exit(2)
  }
  const send = process.send?.bind(process)
  if (!send) throw new Error('mtls-target must be started by the bench (IPC channel missing)')
  const target = kind === 'ceiling' ? await startCeiling(root, key) : await startRealController(root, key, kind === 'controller-ha' ? haFile : undefined)
  process.on('message', (msg: unknown) => {
    if (msg === 'cpu') send({ cpu: process.cpuUsage() })
  })
  send({ port: target.port })
  process.once('disconnect', () => {
    target.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    )
  })
}

main().catch((err: Error) => {
  process.stderr.write(`mtls-target: ${err.message}\n`)
  process.exit(1)
})
