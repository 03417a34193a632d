/**
 * Real mTLS test harness: a PKI made at run time by our own toolkit, a controller started in-process
 * on 127.0.0.1:0, and an HTTPS client that presents a chosen bundle (or none).
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import https from 'node:https'
import { join } from 'node:path'
import { initPki } from '../../pki/init-pki.js'
import { issueBundle, issueServerCert } from '../../pki/issue-certs.js'
import { parseConfig } from '../../src/config.js'
import { startController, type RunningController, type RuntimeOptions } from '../../src/runtime.js'

export interface Identity {
  readonly cert: string
  readonly key: string
}

export interface Pki {
  readonly dir: string
  readonly ca: string
}

/** Creates a PKI with a localhost server certificate under `root/pki`. */
export async function makePki(root: string): Promise<Pki> {
  const dir = join(root, 'pki')
  await initPki(dir)
  await issueServerCert(dir, { dns: ['localhost'], ip: ['127.0.0.1'] })
  return { dir, ca: readFileSync(join(dir, 'ca.pem'), 'utf8') }
}

/** Issues a bundle with the toolkit and reads it back (with `replace`: tests issue a name again on purpose, as rotations). */
export async function bundle(pki: Pki, name: string, role: 'node' | 'operator' | 'signer', opts: { notBefore?: Date; days?: number; outDir?: string } = {}): Promise<Identity & { serial: string }> {
  const out = await issueBundle(pki.dir, name, role, { replace: true, ...opts })
  return { cert: readFileSync(join(out.bundleDir, 'cert.pem'), 'utf8'), key: readFileSync(join(out.bundleDir, 'key.pem'), 'utf8'), serial: out.serial }
}

/**
 * Makes a client certificate with the OpenSSL CLI and our CA key, for shapes the toolkit refuses to
 * issue. `subject` is an openssl -subj string; `ext` the extension lines of the -extfile.
 */
export function opensslCert(pki: Pki, work: string, label: string, subject: string, ext: string[], opts: { multivalue?: boolean; caKey?: string; caCert?: string } = {}): Identity {
  mkdirSync(work, { recursive: true })
  const key = join(work, `${label}.key`)
  const csr = join(work, `${label}.csr`)
  const crt = join(work, `${label}.pem`)
  const extFile = join(work, `${label}.ext`)
  writeFileSync(extFile, ext.join('\n') + '\n')
  execFileSync('openssl', ['req', '-new', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', csr, '-subj', subject, ...(opts.multivalue ? ['-multivalue-rdn'] : [])], { stdio: 'pipe' })
  execFileSync('openssl', ['x509', '-req', '-in', csr, '-CA', opts.caCert ?? join(pki.dir, 'ca.pem'), '-CAkey', opts.caKey ?? join(pki.dir, 'ca-key.pem'), '-set_serial', `0x${Date.now().toString(16)}${Math.floor(Math.random() * 1e6).toString(16)}`, '-days', '2', '-sha256', '-out', crt, ...(ext.length ? ['-extfile', extFile] : [])], { stdio: 'pipe' })
  return { cert: readFileSync(crt, 'utf8'), key: readFileSync(key, 'utf8') }
}

export interface TestController {
  readonly running: RunningController
  readonly port: number
  /** The ops endpoint's port (plain HTTP on 127.0.0.1), or null when the test turned it off. */
  readonly opsPort: number | null
  readonly root: string
}

/** A controller config over the PKI's files, with state and audit log under `root`, on a free loopback port. */
export function testConfig(pki: Pki, root: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port: 0 },
    tls: { ca: join(pki.dir, 'ca.pem'), cert: join(pki.dir, 'server.pem'), key: join(pki.dir, 'server-key.pem'), crl: join(pki.dir, 'crl.pem') },
    plan_keys: join(pki.dir, 'plan-keys.json'),
    state_dir: join(root, 'state'),
    audit_log: join(root, 'audit.log'),
    controller_id: 'test-controller',
    total_shards: 64,
    max_concurrency: 16,
    // Tests send bursts from one certificate; the rate-limit tests set their own limits.
    rate_limits: { node: { per_second: 100_000, burst: 100_000 }, operator: { per_second: 100_000, burst: 100_000 }, signer: { per_second: 100_000, burst: 100_000 } },
    // A free port: the default 9464 would collide between tests running in parallel.
    ops: { host: '127.0.0.1', port: 0 },
    ...overrides,
  }
}

/** Writes testConfig to `<root>/controller.json` for child-process tests; returns its path. */
export function writeTestConfig(pki: Pki, root: string, overrides: Record<string, unknown> = {}): string {
  const path = join(root, 'controller.json')
  writeFileSync(path, JSON.stringify(testConfig(pki, root, overrides)))
  return path
}

/** Starts a controller over the PKI's files in-process. */
export async function startTestController(pki: Pki, root: string, overrides: Record<string, unknown> = {}, runtime: RuntimeOptions = {}): Promise<TestController> {
  const config = parseConfig(testConfig(pki, root, overrides), root)
  const running = await startController(config, { tickMs: 200, ...runtime })
  return { running, port: running.port, opsPort: running.opsPort, root }
}

export interface Reply {
  readonly status: number
  readonly headers: Record<string, string | string[] | undefined>
  readonly text: string
  readonly json: any
}

export interface RequestOptions {
  readonly method?: string
  readonly body?: unknown
  readonly rawBody?: string | Buffer
  readonly contentType?: string
  readonly agent?: https.Agent
  /** Extra request headers. */
  readonly headers?: Record<string, string>
  /** Send no Host header. */
  readonly noHost?: boolean
  /** The local address to connect from (any 127.x.y.z works on loopback): another "source host". */
  readonly localAddress?: string
}

/** One HTTPS request presenting `id` (or no certificate); rejects when the handshake fails. */
export function request(port: number, ca: string, id: Identity | null, path: string, opts: RequestOptions = {}): Promise<Reply> {
  const payload = opts.rawBody ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body))
  const headers: Record<string, string | number> = { ...opts.headers }
  if (payload !== undefined) {
    headers['content-type'] = opts.contentType ?? 'application/json'
    headers['content-length'] = Buffer.byteLength(payload)
  }
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: opts.method ?? (payload === undefined ? 'GET' : 'POST'),
        ca,
        ...(id ? { cert: id.cert, key: id.key } : {}),
        headers,
        agent: opts.agent ?? false,
        ...(opts.noHost ? { setHost: false } : {}),
        ...(opts.localAddress ? { localAddress: opts.localAddress } : {}),
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8')
          let json: unknown = undefined
          try {
            json = JSON.parse(text)
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json })
        })
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    if (payload !== undefined) req.write(payload)
    req.end()
  })
}

/** One unlabelled series from a controller's ops endpoint (/metrics); throws when it or the endpoint is missing. */
export async function opsMetric(ctl: Pick<TestController, 'opsPort'>, name: string): Promise<number> {
  if (ctl.opsPort === null) throw new Error('the controller runs no ops endpoint')
  const text = await (await fetch(`http://127.0.0.1:${ctl.opsPort}/metrics`)).text()
  const line = text.split('\n').find((l) => l.startsWith(`${name} `))
  if (line === undefined) throw new Error(`metric ${name} missing`)
  return Number(line.split(' ')[1])
}

/** A valid check-in body for `nodeId`. */
export function checkinBody(nodeId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { node_id: nodeId, capacity: 16, ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0, ...extra }
}
