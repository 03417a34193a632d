/**
 * The enrollment section of `npm run bench` (`-- --only enroll`): the boot storm of SPEC "Device enrollment
 * and renewal". N diskless nodes power on at once: each makes a P-256 key in memory, sends its CSR with the
 * token's proof to the enrollment listener, polls until the signer (`pxe-pki signer`, a real process with a
 * signer bundle) has issued its certificate, then checks in over mTLS with it. Reported: the time until
 * every node checked in, the controller's CPU per enrollment and the signer's per certificate, against a
 * bare TLS handshake on the same listener measured in the same run; then renewals of some of those nodes,
 * priced the same way, and what 10,000 nodes renewing 1-day certificates cost the controller in steady state.
 *
 * The controller and the signer each run in a process of their own and their CPU is read for the whole
 * process (every thread): the controller's through process.cpuUsage() over IPC, the signer's from
 * /proc/<pid>/stat. The nodes are this process (they do what `pxe-node --enroll` does, without shards).
 */
import { fork, spawn, type ChildProcess } from 'node:child_process'
import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import https from 'node:https'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import tls from 'node:tls'
import { fileURLToPath } from 'node:url'
import { initPki } from '../pki/init-pki.js'
import { issueBundle, issueServerCert } from '../pki/issue-certs.js'
import { createToken } from '../pki/token-store.js'
import { enrollProof, parseToken } from '../src/core/enroll-token.js'
import { buildCsr, csrDer } from '../src/der/csr.js'

type Log = (line: string) => void

/** Nodes in the boot storm, and nodes that renew afterwards. */
export const BOOT_STORM_NODES = 1000
const RENEWING_NODES = 200
const BARE_HANDSHAKES = 300
/** The fleet whose steady renewal load is reported, and its certificates' lifetime. */
const STEADY_FLEET = 10_000
const CERT_LIFETIME_S = 86_400
/** A node gives up after this long (the target is 60 s). */
const STORM_LIMIT_MS = 180_000
const CLOCK_TICKS_PER_S = 100

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const fmtLoad = (): string => loadavg().map((l) => l.toFixed(2)).join(', ')

interface Controller {
  readonly child: ChildProcess
  readonly port: number
  readonly enrollPort: number
  cpuMicros(): Promise<number>
}

function startController(root: string): Promise<Controller> {
  const child = fork(fileURLToPath(new URL('./enroll-target.js', import.meta.url)), [root], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  const waiting: Array<(micros: number) => void> = []
  child.on('message', (msg: unknown) => {
    if (typeof msg === 'object' && msg !== null && 'cpu' in msg) {
      const cpu = (msg as { cpu: { user: number; system: number } }).cpu
      waiting.shift()?.(cpu.user + cpu.system)
    }
  })
  const cpuMicros = () => new Promise<number>((resolve) => (waiting.push(resolve), child.send('cpu')))
  return new Promise((resolve, reject) => {
    child.once('message', (msg: { port: number; enrollPort: number }) => resolve({ child, port: msg.port, enrollPort: msg.enrollPort, cpuMicros }))
    child.once('exit', (code) => reject(new Error(`the controller exited with code ${code} before listening`)))
  })
}

/** User + system CPU of a process so far (µs), from /proc (Linux). */
function procCpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S) * 1_000_000
}

interface Reply {
  readonly status: number
  readonly json: any
}

function call(port: number, ca: string, path: string, opts: { body?: unknown; agent?: https.Agent; cert?: string; key?: string } = {}): Promise<Reply> {
  const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body)
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1', port, path, ca, method: payload === undefined ? 'GET' : 'POST', agent: opts.agent ?? false,
        ...(opts.cert === undefined ? {} : { cert: opts.cert, key: opts.key }),
        headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8')
          let json: unknown = null
          try {
            json = JSON.parse(text)
          } catch {
            json = text
          }
          resolve({ status: res.statusCode ?? 0, json })
        })
        res.on('error', reject)
      },
    )
    req.setTimeout(30_000, () => req.destroy(new Error('timeout')))
    req.on('error', reject)
    if (payload !== undefined) req.write(payload)
    req.end()
  })
}

/** Polls a request until the signer answered it; returns the issued answer. */
async function untilIssued(poll: () => Promise<Reply>, pollAfterMs: number, deadline: number): Promise<Reply> {
  for (;;) {
    await sleep(pollAfterMs)
    const reply = await poll()
    if (reply.status === 200 && reply.json.status === 'issued') return reply
    if (reply.status !== 200 && reply.status !== 429) throw new Error(`poll answered ${reply.status}: ${JSON.stringify(reply.json).slice(0, 200)}`)
    if (reply.json?.status === 'denied') throw new Error(`denied: ${reply.json.reason}`)
    if (Date.now() > deadline) throw new Error('no certificate in time')
  }
}

interface Enrolled {
  readonly name: string
  readonly cert: string
  readonly key: string
  readonly doneMs: number
}

/** One node: key, CSR, proof, enroll, poll, check in with the certificate. */
async function bootOne(ctl: Controller, ca: string, token: string, name: string, started: number): Promise<Enrolled> {
  const key: KeyObject = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey
  const csr = buildCsr(name, key)
  const { id, secret } = parseToken(token)
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 })
  try {
    let queued = await call(ctl.enrollPort, ca, '/v1/enroll', { body: { token_id: id, csr, proof: enrollProof(secret, csrDer(csr)) }, agent })
    while (queued.status === 429) {
      await sleep(queued.json.retry_after_ms ?? 1000)
      queued = await call(ctl.enrollPort, ca, '/v1/enroll', { body: { token_id: id, csr, proof: enrollProof(secret, csrDer(csr)) }, agent })
    }
    if (queued.status !== 202) throw new Error(`enroll answered ${queued.status}: ${JSON.stringify(queued.json).slice(0, 200)}`)
    const issued = await untilIssued(() => call(ctl.enrollPort, ca, `/v1/enroll/${queued.json.request_id}`, { agent }), queued.json.poll_after_ms, Date.now() + STORM_LIMIT_MS)
    const identity = { cert: issued.json.certificate as string, key: key.export({ type: 'pkcs8', format: 'pem' }) as string }
    const checkin = await call(ctl.port, ca, '/v1/checkin', { ...identity, body: { node_id: name, capacity: 4, ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 } })
    if (checkin.status !== 200) throw new Error(`check-in answered ${checkin.status}`)
    return { name, ...identity, doneMs: performance.now() - started }
  } finally {
    agent.destroy()
  }
}

/** One renewal: a new key, POST /v1/renew over mTLS, poll until issued. */
async function renewOne(ctl: Controller, ca: string, node: Enrolled, deadline: number): Promise<void> {
  const key = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1, cert: node.cert, key: node.key, ca })
  try {
    const queued = await call(ctl.port, ca, '/v1/renew', { body: { csr: buildCsr(node.name, key) }, agent })
    if (queued.status !== 202) throw new Error(`renew answered ${queued.status}: ${JSON.stringify(queued.json).slice(0, 200)}`)
    await untilIssued(() => call(ctl.port, ca, `/v1/renew/${queued.json.request_id}`, { agent }), queued.json.poll_after_ms, deadline)
  } finally {
    agent.destroy()
  }
}

/** `count` bare TLS handshakes on the enrollment listener (connect, handshake, close), 8 at a time. */
async function bareHandshakes(port: number, ca: string, count: number): Promise<void> {
  let next = 0
  const worker = async () => {
    while (next < count) {
      next += 1
      await new Promise<void>((resolve, reject) => {
        const socket = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
          socket.end()
          resolve()
        })
        socket.on('error', reject)
      })
    }
  }
  await Promise.all(Array.from({ length: 8 }, worker))
}

const pct = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))]!

/** Runs the boot storm and the renewals, and prints the figures. */
export async function runEnrollBench(log: Log, nodes = BOOT_STORM_NODES): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'pxe-enroll-bench-'))
  let ctl: Controller | null = null
  let signer: ChildProcess | null = null
  try {
    log(`enrollment bench: Node ${process.version}, OpenSSL ${process.versions.openssl}; machine load (1/5/15 min) at start: ${fmtLoad()} on ${availableParallelism()} cores`)
    const pkiDir = join(root, 'pki')
    await initPki(pkiDir)
    await issueServerCert(pkiDir, { dns: ['localhost'], ip: ['127.0.0.1'], keyType: 'ec' })
    const signerBundle = await issueBundle(pkiDir, 'bench-signer', 'signer', { keyType: 'ec' })
    const { token } = await createToken(pkiDir, { names: 'boot-*', uses: nodes + 10, approve: 'auto' })
    const ca = await readFile(join(pkiDir, 'ca.pem'), 'utf8')
    ctl = await startController(root)
    const c = ctl
    log(`  a PKI (RSA 3072 CA, P-256 server certificate), a token for boot-* with ${nodes + 10} uses, a signer bundle; the controller and the signer in processes of their own`)

    // the signer: the real CLI, a pass every second
    const cli = fileURLToPath(new URL('../pki/cli.js', import.meta.url))
    signer = spawn(process.execPath, [cli, 'signer', '--dir', pkiDir, '--controller', `https://127.0.0.1:${c.port}`, '--bundle', signerBundle.bundleDir, '--interval', '1'], { stdio: ['ignore', 'ignore', 'pipe'] })
    let signerOut = ''
    signer.stderr?.on('data', (d: Buffer) => (signerOut += d.toString('utf8')))
    await sleep(1500)
    if (signer.exitCode !== null) throw new Error(`the signer exited (${signer.exitCode}): ${signerOut.slice(0, 400)}`)
    const signerPid = signer.pid!

    // a bare TLS handshake on the same listener, as the yardstick
    const h0 = await c.cpuMicros()
    await bareHandshakes(c.enrollPort, ca, BARE_HANDSHAKES)
    const handshakeUs = ((await c.cpuMicros()) - h0) / BARE_HANDSHAKES
    log(`  bare TLS handshake on the enrollment listener (P-256 server key, no client certificate): ${(handshakeUs / 1000).toFixed(2)} ms of controller CPU each (${BARE_HANDSHAKES} handshakes)`)

    // the boot storm
    log(`  boot storm: ${nodes} nodes power on at once…`)
    const cpu0 = await c.cpuMicros()
    const signer0 = procCpuMicros(signerPid)
    const started = performance.now()
    const results = await Promise.allSettled(Array.from({ length: nodes }, (_, i) => bootOne(c, ca, token, `boot-${String(i).padStart(4, '0')}`, started)))
    const wallMs = performance.now() - started
    const controllerUs = (await c.cpuMicros()) - cpu0
    const signerUs = procCpuMicros(signerPid) - signer0
    const enrolled = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []))
    const failed = results.flatMap((r) => (r.status === 'rejected' ? [String((r.reason as Error).message)] : []))
    const done = enrolled.map((e) => e.doneMs).sort((a, b) => a - b)
    log(`  every node checked in with its enrolled certificate after ${(wallMs / 1000).toFixed(1)} s (target: 60 s); ${enrolled.length} of ${nodes} enrolled${failed.length > 0 ? `, ${failed.length} failed (first: ${failed[0]})` : ''}`)
    if (done.length > 0) log(`    per node, power-on to check-in: median ${(pct(done, 0.5) / 1000).toFixed(1)} s, p95 ${(pct(done, 0.95) / 1000).toFixed(1)} s, max ${(done.at(-1)! / 1000).toFixed(1)} s`)
    const perEnrollMs = controllerUs / 1000 / Math.max(1, enrolled.length)
    log(`    controller CPU per enrollment (the POST, the polls, the signer's pull and post, the first mTLS check-in): ${perEnrollMs.toFixed(2)} ms = ${(perEnrollMs / (handshakeUs / 1000)).toFixed(1)} bare handshakes; ${(controllerUs / 1e6).toFixed(1)} s in all, ${((controllerUs / 1000 / wallMs) * 100).toFixed(0)} % of one core over the storm`)
    log(`    signer CPU per certificate (pull, judge: token, pattern, proof, CSR; sign with the RSA 3072 CA key; post; one index write per pass): ${(signerUs / 1000 / Math.max(1, enrolled.length)).toFixed(2)} ms`)
    log(`    machine load after the storm: ${fmtLoad()}`)

    // renewals
    const renewing = enrolled.slice(0, Math.min(RENEWING_NODES, enrolled.length))
    const r0 = await c.cpuMicros()
    const rs0 = procCpuMicros(signerPid)
    const rStarted = performance.now()
    const renewed = await Promise.allSettled(renewing.map((n) => renewOne(c, ca, n, Date.now() + STORM_LIMIT_MS)))
    const renewalUs = (await c.cpuMicros()) - r0
    const renewalSignerUs = procCpuMicros(signerPid) - rs0
    const okRenewals = renewed.filter((r) => r.status === 'fulfilled').length
    const perRenewalMs = renewalUs / 1000 / Math.max(1, okRenewals)
    const rate = STEADY_FLEET / CERT_LIFETIME_S
    log(`  renewals: ${okRenewals} of ${renewing.length} nodes renewed in ${((performance.now() - rStarted) / 1000).toFixed(1)} s; controller CPU ${perRenewalMs.toFixed(2)} ms per renewal (new mTLS connection, POST /v1/renew, polls, the signer's pull and post), signer ${(renewalSignerUs / 1000 / Math.max(1, okRenewals)).toFixed(2)} ms`)
    log(`    ${STEADY_FLEET.toLocaleString('en-US')} nodes renewing 1-day certificates at two thirds of their lifetime: ${(rate * 1.5).toFixed(3)} renewals a second, ${((perRenewalMs * rate * 1.5) / 10).toFixed(3)} % of one core of the controller`)
  } finally {
    if (signer !== null && signer.exitCode === null) {
      const s = signer
      await new Promise<void>((resolve) => (s.once('exit', () => resolve()), s.kill('SIGTERM')))
    }
    if (ctl !== null && ctl.child.connected) {
      const child = ctl.child
      await new Promise<void>((resolve) => (child.once('exit', () => resolve()), child.disconnect()))
    }
    await rm(root, { recursive: true, force: true })
  }
}
