/**
 * A real etcd on loopback with client and peer mutual TLS, for the tests (test/support/etcd-cluster.ts
 * wraps it in tap teardown) and the fleet simulator's HA mode: finding the binary, certificates made at
 * run time by the OpenSSL CLI in a scratch folder, members spawned so that they die with this process
 * (at its exit, and through setpriv's parent-death signal even when it is killed), free ports.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { accessSync, chmodSync, constants, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { promisify } from 'node:util'
import type { EtcdConnectionConfig } from '../../src/ha/etcd-api.js'

const execFileAsync = promisify(execFile)

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

function which(name: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/bin', '/usr/local/bin']
  for (const dir of dirs) if (dir && executable(join(dir, name))) return join(dir, name)
  return null
}

/** The etcd binary: `$ETCD_BIN`, else `etcd` on the PATH; null when there is none. */
export function findEtcd(): string | null {
  const fromEnv = process.env.ETCD_BIN
  if (fromEnv) return executable(fromEnv) ? fromEnv : null
  return which('etcd')
}

/**
 * tap options for a test that needs etcd: skipped with the reason when no binary is found, except in CI
 * (env CI set), where the test runs and fails, so a CI that lost etcd cannot pass by skipping.
 */
export function needsEtcd(): { skip?: string } {
  if (findEtcd() !== null || process.env.CI) return {}
  return { skip: 'no etcd binary found (apt-get install etcd-server, or set ETCD_BIN); in CI this fails instead' }
}

/** Every etcd (and helper) process started here, killed synchronously if the test process exits. */
const live = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL')
})

const setpriv = which('setpriv')

/**
 * Spawns a helper process that dies with this one: through `setpriv --pdeathsig KILL` when available
 * (covers a test process killed by a signal), and at this process's exit in any case.
 */
export function spawnGuarded(command: string, args: string[], options: { env?: NodeJS.ProcessEnv; stdin?: 'pipe' | 'ignore' } = {}): ChildProcess {
  const [cmd, argv] = setpriv ? [setpriv, ['--pdeathsig', 'KILL', '--', command, ...args]] : [command, args]
  const child = spawn(cmd, argv, { stdio: [options.stdin ?? 'ignore', 'pipe', 'pipe'], env: options.env ?? process.env })
  live.add(child)
  child.once('exit', () => live.delete(child))
  return child
}

/** Resolves once `child` has exited (at once if it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => child.once('exit', () => resolve()))
}

async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = []
  try {
    for (let i = 0; i < count; i++) {
      const server = createServer()
      servers.push(server)
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
    }
    return servers.map((s) => (s.address() as { port: number }).port)
  } finally {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))))
  }
}

/** True while a process with this pid exists. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** A scratch folder on tmpfs when there is one: etcd fsyncs every commit, and a loaded disk is slow. */
export function scratchDir(): string {
  for (const base of ['/dev/shm', tmpdir()]) {
    try {
      // first remove what test processes that were killed (so could not clean up) left here
      for (const name of readdirSync(base)) {
        const pid = /^pxe-etcd-(\d+)-/.exec(name)?.[1]
        if (pid && !processAlive(Number(pid))) rmSync(join(base, name), { recursive: true, force: true })
      }
      return mkdtempSync(join(base, `pxe-etcd-${process.pid}-`))
    } catch {
      // not writable here: try the next one
    }
  }
  throw new Error('no writable temp folder')
}

/** The files of an etcd PKI made by makeCertificates. */
export interface Certificates {
  readonly ca: string
  readonly server: { cert: string; key: string }
  readonly peer: { cert: string; key: string }
  readonly client: { cert: string; key: string }
}

const SERVER_EXT = 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n'
const CLIENT_EXT = 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n'
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes']

/** An etcd CA, server and peer certificates for 127.0.0.1 (and the name localhost), and a client certificate, by the OpenSSL CLI. */
export async function makeCertificates(dir: string): Promise<Certificates> {
  const at = (name: string) => join(dir, name)
  const caExt = ['-addext', 'basicConstraints=critical,CA:TRUE,pathlen:0', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']
  await execFileAsync('openssl', ['req', '-x509', ...EC_KEY, '-keyout', at('ca-key.pem'), '-out', at('ca.pem'), '-days', '2', '-subj', '/CN=pxe-test-etcd-ca', ...caExt])
  const leaf = async (name: string, cn: string, ext: string, serial: number) => {
    writeFileSync(at(`${name}.ext`), ext)
    await execFileAsync('openssl', ['req', '-new', ...EC_KEY, '-keyout', at(`${name}-key.pem`), '-out', at(`${name}.csr`), '-subj', `/CN=${cn}`])
    const sign = ['-CA', at('ca.pem'), '-CAkey', at('ca-key.pem'), '-set_serial', String(serial), '-days', '2', '-sha256']
    await execFileAsync('openssl', ['x509', '-req', '-in', at(`${name}.csr`), ...sign, '-extfile', at(`${name}.ext`), '-out', at(`${name}.pem`)])
    chmodSync(at(`${name}-key.pem`), 0o600)
    return { cert: at(`${name}.pem`), key: at(`${name}-key.pem`) }
  }
  const [server, peer, client] = await Promise.all([
    leaf('server', 'etcd-server', SERVER_EXT, 2),
    leaf('peer', 'etcd-peer', SERVER_EXT, 3),
    leaf('client', 'pxe-controller', CLIENT_EXT, 4),
  ])
  return { ca: at('ca.pem'), server, peer, client }
}

interface MemberSpec {
  readonly name: string
  readonly clientUrl: string
  readonly peerUrl: string
  readonly dataDir: string
}

/** One running (or stopped) etcd member. */
export interface EtcdMember {
  readonly name: string
  readonly endpoint: string
  /** The current process; null while the member is stopped. */
  readonly process: ChildProcess | null
  /** This member's log (zap JSON lines), the last 256 KiB. */
  log(): string
}

/** One member's process, started (and started again) on its data folder. */
export class Member implements EtcdMember {
  process: ChildProcess | null = null
  private output = ''

  constructor(private readonly spec: MemberSpec, private readonly args: string[], private readonly bin: string) {}

  get name(): string {
    return this.spec.name
  }

  get endpoint(): string {
    return this.spec.clientUrl
  }

  log(): string {
    return this.output
  }

  /** Starts the process and resolves once it serves clients; rejects with its log if it exits first. */
  start(timeoutMs = 20_000): Promise<void> {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ETCD_')))
    const child = spawnGuarded(this.bin, this.args, { env })
    this.process = child
    const collect = (chunk: Buffer) => (this.output = (this.output + chunk.toString()).slice(-256 * 1024))
    child.stdout!.on('data', collect)
    child.stderr!.on('data', collect)
    let seen = ''
    return new Promise((resolve, reject) => {
      const done = (err?: Error) => {
        clearTimeout(timer)
        child.stderr!.off('data', watchReady)
        child.off('exit', onExit)
        if (!err) return resolve()
        child.kill('SIGKILL')
        err.message += `\n${seen.slice(-4000)}`
        reject(err)
      }
      const watchReady = (chunk: Buffer) => {
        seen += chunk.toString()
        if (seen.includes('"msg":"serving client traffic securely"')) done()
      }
      const onExit = (code: number | null, signal: string | null) => done(new Error(`etcd ${this.name} exited (${code ?? signal}) before it was ready`))
      const timer = setTimeout(() => done(new Error(`etcd ${this.name} not ready in ${timeoutMs} ms`)), timeoutMs)
      child.stderr!.on('data', watchReady)
      child.once('exit', onExit)
    })
  }

  /** Sends `signal` and waits until it took effect: frozen, woken, or (any other signal) gone. */
  async signal(signal: NodeJS.Signals): Promise<void> {
    const child = this.process
    if (!child) throw new Error(`etcd ${this.name} is not running`)
    child.kill(signal)
    // A signal is delivered asynchronously: a freeze (or wake) is done only once the kernel says so,
    // else a caller that looks at once may still see the process running (a loaded machine showed it).
    if (signal === 'SIGSTOP' || signal === 'SIGCONT') return settledState(child.pid!, signal === 'SIGSTOP')
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
    await exited(child)
    clearTimeout(timer)
    this.process = null
  }
}


function memberArgs(spec: MemberSpec, all: readonly MemberSpec[], certs: Certificates, token: string, maxTxnOps: number | undefined): string[] {
  return [
    '--name', spec.name, '--data-dir', spec.dataDir, '--logger=zap', '--log-outputs=stderr',
    '--listen-client-urls', spec.clientUrl, '--advertise-client-urls', spec.clientUrl,
    '--listen-peer-urls', spec.peerUrl, '--initial-advertise-peer-urls', spec.peerUrl,
    '--initial-cluster', all.map((m) => `${m.name}=${m.peerUrl}`).join(','),
    '--initial-cluster-state', 'new', '--initial-cluster-token', token,
    '--cert-file', certs.server.cert, '--key-file', certs.server.key, '--trusted-ca-file', certs.ca, '--client-cert-auth',
    '--peer-cert-file', certs.peer.cert, '--peer-key-file', certs.peer.key, '--peer-trusted-ca-file', certs.ca, '--peer-client-cert-auth',
    // without compaction the revision history (and the database) grows without bound
    '--auto-compaction-mode', 'revision', '--auto-compaction-retention', '1000',
    ...(maxTxnOps === undefined ? [] : ['--max-txn-ops', String(maxTxnOps)]),
  ]
}

async function launch(bin: string, dir: string, size: number, certs: Certificates, maxTxnOps: number | undefined): Promise<Member[]> {
  const ports = await freePorts(2 * size)
  const token = `pxe-test-${process.pid}-${ports[0]}`
  const specs: MemberSpec[] = Array.from({ length: size }, (_, i) => ({
    name: `m${i}`,
    clientUrl: `https://127.0.0.1:${ports[2 * i]}`,
    peerUrl: `https://127.0.0.1:${ports[2 * i + 1]}`,
    dataDir: join(dir, `m${i}-${ports[0]}`),
  }))
  const members = specs.map((spec) => new Member(spec, memberArgs(spec, specs, certs, token, maxTxnOps), bin))
  const started = await Promise.allSettled(members.map((m) => m.start()))
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected')
  if (failed) {
    await Promise.all(members.filter((m) => m.process).map((m) => m.signal('SIGKILL')))
    throw failed.reason
  }
  return members
}


/** A running set of etcd members and what a client needs to reach them. */
export interface EtcdMembers {
  readonly members: readonly Member[]
  /** Endpoints and the client certificate, as the HA config gives them. */
  readonly connection: EtcdConnectionConfig
  /** The scratch folder (certificates and data); removed at close. */
  readonly dir: string
  /** Kills every member still running and removes the folder. */
  close(): Promise<void>
}

/**
 * Starts `size` members and waits until every one serves clients; on a failure everything started is
 * killed and the folder removed. A port taken between the probe and etcd's bind is retried with new ports.
 * `maxTxnOps`: the members' --max-txn-ops (etcd's default, 128, when not given).
 */
export async function startEtcdMembers(size: number, options: { readonly maxTxnOps?: number } = {}): Promise<EtcdMembers> {
  const bin = findEtcd()
  if (!bin) throw new Error('no etcd binary found: CI must install etcd-server (see .ci/run), or set ETCD_BIN')
  const dir = scratchDir()
  let members: Member[] | undefined
  const close = async () => {
    await Promise.all((members ?? []).filter((m) => m.process).map((m) => m.signal('SIGKILL')))
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    const certs = await makeCertificates(dir)
    mkdirSync(join(dir, 'data'), { mode: 0o700 })
    for (let attempt = 1; !members; attempt++) {
      try {
        members = await launch(bin, join(dir, 'data'), size, certs, options.maxTxnOps)
      } catch (err) {
        if (attempt >= 3 || !String(err).includes('address already in use')) throw err
      }
    }
    const connection: EtcdConnectionConfig = { endpoints: members.map((m) => m.endpoint), ca: certs.ca, ...certs.client }
    return { members, connection, dir, close }
  } catch (err) {
    await close()
    throw err
  }
}

/** Polls /proc until the process is stopped (`stopped`) or no longer stopped; at most 2 s. */
async function settledState(pid: number, stopped: boolean): Promise<void> {
  for (let i = 0; i < 200; i++) {
    let state: string | undefined
    try {
      state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0]
    } catch {
      return // gone: nothing left to freeze or wake
    }
    if ((state === 'T' || state === 't') === stopped) return
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}
