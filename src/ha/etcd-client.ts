/**
 * The only module that imports the etcd client library (npm `etcd3`): `EtcdClient` (etcd-api.ts) over
 * it, so the library can be replaced without touching election, fencing or reads.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { assertPrivateKeyFile } from '../config.js'
import {
  Etcd3,
  EtcdLeaseInvalidError,
  GRPCDeadlineExceededError,
  GRPCUnavailableError,
  type ICompare,
  type IKeyValue,
  type IOptions,
  type IRequestOp,
} from 'etcd3'
import {
  EtcdClientError,
  type EtcdClient,
  type EtcdConnectionConfig,
  type EtcdKeyValue,
  type EtcdWatch,
  type RangeRequest,
  type RangeResult,
  type TxnCompare,
  type TxnOp,
  type TxnRequest,
  type TxnResult,
} from './etcd-api.js'
import { memberPolicies, retryOnOtherMember, type MemberPolicies } from './member-policy.js'
import { MAX_RESPONSE_BYTES } from './etcd-limits.js'

/** Options of `connectEtcd`. */
export interface EtcdClientOptions {
  /** Deadline of one unary call (a range, a transaction, a lease grant); default 5000 ms. */
  readonly requestTimeoutMs?: number
}

/**
 * Opens a client over mutual TLS, trusting only `config.ca`. Reads the PEM files first: names the one it
 * cannot read, and refuses a client key that group or others may read.
 */
export async function connectEtcd(config: EtcdConnectionConfig, options: EtcdClientOptions = {}): Promise<EtcdClient> {
  if (config.endpoints.length === 0) throw new Error('etcd: no endpoints given')
  await assertPrivateKeyFile(config.key, 'ha.etcd.key')
  const [rootCertificate, certChain, privateKey] = await Promise.all([
    readPem(config.ca, 'CA certificate', 'ha.etcd.ca'),
    readPem(config.cert, 'client certificate', 'ha.etcd.cert'),
    readPem(config.key, 'client key', 'ha.etcd.key'),
  ])
  // gRPC would only find a bad PEM at the first handshake, as endless campaign failures: refuse it now
  checkPem(() => new X509Certificate(rootCertificate), config.ca, 'ha.etcd.ca', 'a CA certificate')
  checkPem(() => new X509Certificate(certChain), config.cert, 'ha.etcd.cert', 'a certificate')
  checkPem(() => createPrivateKey(privateKey), config.key, 'ha.etcd.key', 'a private key')
  const requestTimeoutMs = options.requestTimeoutMs ?? 5000
  const faults = faultHandling(config.endpoints.length)
  const etcd = new Etcd3({
    hosts: [...config.endpoints],
    credentials: { rootCertificate, certChain, privateKey },
    grpcOptions: {
      // read pages are sized by this (etcd-limits.ts MAX_RESPONSE_BYTES): 1,000 entries a page, not 62
      'grpc.max_receive_message_length': MAX_RESPONSE_BYTES,
      // grpc-js sends the endpoint's host as SNI, an IP address included (Node then warns DEP0123); with a
      // server name it sends that and checks the certificate against it (tls.checkServerIdentity) instead
      ...(config.serverName === undefined ? {} : { 'grpc.ssl_target_name_override': config.serverName }),
    },
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + requestTimeoutMs }),
    faultHandling: faults.handling,
  })
  return new Etcd3Client(etcd, (call, peer) => faults.members.failCallOf(call) || (peer !== undefined && faults.members.failAddress(peer)))
}

async function readPem(path: string, what: string, key: string): Promise<Buffer> {
  try {
    return await readFile(path)
  } catch (err) {
    throw new Error(`key "${key}": cannot read the etcd ${what} ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
}

function checkPem(parse: () => unknown, path: string, key: string, what: string): void {
  try {
    parse()
  } catch {
    throw new Error(`key "${key}": ${path} is not ${what} in PEM form`)
  }
}

type FaultHandling = NonNullable<IOptions['faultHandling']>
type Policy = NonNullable<FaultHandling['global']>
interface WatchBackoff {
  readonly duration: number
  next(): WatchBackoff
}

/**
 * The fault handling of member-policy.ts instead of etcd3's 5 s circuit breaker (etcd3 1.1.2 only calls
 * `execute` on these). etcd3's watch reconnects back off up to 30 s, on a timer that outlives
 * `close()`; ours stop at 2 s.
 */
function faultHandling(members: number): { handling: FaultHandling; members: MemberPolicies } {
  const memberFault = (err: unknown) => err instanceof GRPCUnavailableError || err instanceof GRPCDeadlineExceededError
  const backoff = (duration: number): WatchBackoff => ({ duration, next: () => backoff(Math.min(2 * duration, 2000)) })
  const perMember = memberPolicies(memberFault)
  return {
    members: perMember,
    handling: {
      host: (member) => perMember(member) as unknown as Policy,
      global: retryOnOtherMember(members, (err) => err instanceof GRPCUnavailableError) as unknown as Policy,
      watchBackoff: { duration: 0, next: () => backoff(250) } as unknown as FaultHandling['watchBackoff'],
    },
  }
}

/** Maps a library error to `EtcdClientError`, keeping etcd's own message. */
function clientError(err: unknown): EtcdClientError {
  if (err instanceof EtcdClientError) return err
  const message = err instanceof Error ? err.message : String(err)
  if (err instanceof EtcdLeaseInvalidError) return new EtcdClientError('lease_not_found', message)
  if (err instanceof GRPCUnavailableError) return new EtcdClientError('unavailable', message)
  if (err instanceof GRPCDeadlineExceededError) return new EtcdClientError('timeout', message)
  if (message.includes('required revision has been compacted')) return new EtcdClientError('compacted', message)
  if (message.includes('too many operations in txn request')) return new EtcdClientError('too_many_ops', message)
  return new EtcdClientError('failed', message)
}

function keyValue(kv: IKeyValue): EtcdKeyValue {
  return {
    key: kv.key.toString('utf8'),
    value: kv.value,
    createRevision: kv.create_revision,
    modRevision: kv.mod_revision,
    version: kv.version,
    lease: kv.lease,
  }
}

const COMPARE_TARGET = {
  create: ['Create', 'create_revision'],
  mod: ['Mod', 'mod_revision'],
  version: ['Version', 'version'],
  lease: ['Lease', 'lease'],
} as const
const COMPARE_RESULT = { equal: 'Equal', not_equal: 'NotEqual', greater: 'Greater', less: 'Less' } as const

function toEtcdCompare(c: TxnCompare): ICompare {
  const [target, field] = COMPARE_TARGET[c.target]
  return { key: Buffer.from(c.key), target, result: COMPARE_RESULT[c.result], [field]: c.value }
}

function toEtcdOp(op: TxnOp): IRequestOp {
  switch (op.type) {
    case 'put':
      return { request_put: { key: Buffer.from(op.key), value: Buffer.from(op.value), ...(op.lease ? { lease: op.lease } : {}) } }
    case 'delete':
      return { request_delete_range: { key: Buffer.from(op.key), ...(op.rangeEnd ? { range_end: op.rangeEnd } : {}) } }
    case 'get':
      return { request_range: { key: Buffer.from(op.key) } }
  }
}

/**
 * A timeout that measures etcd's silence, not this process's business: when the timer fires more than
 * half its length late, the event loop was busy (a fleet's check-ins) and the request may not even have
 * left yet (a write waits for its own loop turn), so it waits once more from now; when it fires about on
 * time it gives up only after the loop's poll phase (setImmediate), so that an answer already received is
 * read first. A loop that stays that busy ends the renewals through the renew deadline instead.
 */
function lagAwareTimeout(ms: number, onTimeout: () => void): { clear(): void } {
  let timer: NodeJS.Timeout
  let immediate: NodeJS.Immediate | undefined
  const arm = () => {
    const due = performance.now() + ms
    timer = setTimeout(() => {
      if (performance.now() - due > ms / 2) arm()
      else immediate = setImmediate(onTimeout)
    }, ms)
  }
  arm()
  return {
    clear: () => {
      clearTimeout(timer)
      if (immediate) clearImmediate(immediate)
    },
  }
}

/** How long past its timeout a keepalive's gRPC call may live: only a backstop against a hung stream (see keepAliveOnce). */
const KEEPALIVE_BACKSTOP_MS = 1000
const deadline = (timeoutMs: number | undefined) => (timeoutMs === undefined ? undefined : { deadline: Date.now() + timeoutMs })
const SORT_TARGET = { key: 'Key', create: 'Create', mod: 'Mod' } as const
const SORT_ORDER = { ascend: 'Ascend', descend: 'Descend' } as const

class Etcd3Client implements EtcdClient {
  constructor(
    private readonly etcd: Etcd3,
    /** Counts a fault against the member a call was made on, else the one at its peer's host:port (see keepAliveOnce). */
    private readonly memberFailed: (call: object, peer: string | undefined) => boolean,
  ) {}

  async grantLease(ttlSeconds: number, timeoutMs?: number): Promise<{ id: string; ttlSeconds: number }> {
    try {
      const res = await this.etcd.leaseClient.leaseGrant({ TTL: ttlSeconds }, deadline(timeoutMs))
      return { id: res.ID, ttlSeconds: Number(res.TTL) }
    } catch (err) {
      throw clientError(err)
    }
  }

  async keepAliveOnce(leaseId: string, timeoutMs: number): Promise<number> {
    let stream
    try {
      // Under a busy event loop a timer fires before the I/O that arrived in time is read, and gRPC's
      // own deadline would then cancel a renewal etcd had already answered: a leader saturated by a
      // fleet (loop turns of half a second) lost its lease that way with every answer in its socket.
      // The deadline is only a backstop for a hung stream; the timer below decides, after reading.
      stream = await this.etcd.leaseClient.leaseKeepAlive({ deadline: Date.now() + timeoutMs + KEEPALIVE_BACKSTOP_MS })
    } catch (err) {
      throw clientError(err)
    }
    const call = stream
    return new Promise<number>((resolve, reject) => {
      let settled = false
      const finish = (err: EtcdClientError | null, ttl = 0) => {
        if (settled) return
        settled = true
        timer.clear()
        call.end()
        if (err) (call as unknown as { cancel?: () => void }).cancel?.()
        if (err) reject(err)
        else resolve(ttl)
      }
      // The member policies saw only this stream being opened, not its answer timing out: without this, the
      // next renewal could go to the same hung member again (each call picks a member at random), and a
      // leader whose renewals met a frozen member three times in a row stepped down (etcd-members test).
      // The member is the one whose policy opened this stream: grpc-js's getPeer() says 'unknown' until
      // the server's response headers arrive, which a frozen member never sends, so the address is only a
      // fallback.
      const timer = lagAwareTimeout(timeoutMs, () => {
        this.memberFailed(call, (call as unknown as { getPeer?: () => string }).getPeer?.())
        finish(new EtcdClientError('timeout', 'lease keepalive timed out'))
      })
      call.on('data', (res) => finish(null, Number(res.TTL)))
      call.on('error', (err) => finish(clientError(err)))
      call.write({ ID: leaseId })
    })
  }

  async revokeLease(leaseId: string, timeoutMs?: number): Promise<void> {
    try {
      await this.etcd.leaseClient.leaseRevoke({ ID: leaseId }, deadline(timeoutMs))
    } catch (err) {
      throw clientError(err)
    }
  }

  async range(request: RangeRequest, timeoutMs?: number): Promise<RangeResult> {
    try {
      const res = await this.etcd.kv.range(
        {
          key: Buffer.from(request.key),
          ...(request.rangeEnd ? { range_end: request.rangeEnd } : {}),
          ...(request.limit !== undefined ? { limit: request.limit } : {}),
          ...(request.revision !== undefined ? { revision: request.revision } : {}),
          ...(request.sort ? { sort_target: SORT_TARGET[request.sort.target], sort_order: SORT_ORDER[request.sort.order] } : {}),
        },
        deadline(timeoutMs),
      )
      return { kvs: res.kvs.map(keyValue), more: res.more, revision: res.header.revision }
    } catch (err) {
      throw clientError(err)
    }
  }

  async txn(request: TxnRequest, timeoutMs?: number): Promise<TxnResult> {
    try {
      const res = await this.etcd.kv.txn(
        {
          compare: request.compare.map(toEtcdCompare),
          success: request.success.map(toEtcdOp),
          failure: (request.failure ?? []).map(toEtcdOp),
        },
        deadline(timeoutMs),
      )
      const gets = res.responses.filter((r) => r.response_range).map((r) => r.response_range.kvs.map(keyValue))
      return { succeeded: res.succeeded, revision: res.header.revision, gets }
    } catch (err) {
      throw clientError(err)
    }
  }

  watchPrefix(prefix: string, onChange: () => void): EtcdWatch {
    let cancelled = false
    let watcher = this.etcd.watch().prefix(prefix).watcher()
    let retry: NodeJS.Timeout | undefined
    const attach = () => {
      watcher.on('connected', () => onChange())
      watcher.on('data', () => onChange())
      // an unrecoverable watch error (e.g. its resume revision was compacted): start a fresh watch
      watcher.on('error', () => {
        void watcher.cancel().catch(() => undefined)
        if (cancelled) return
        retry = setTimeout(() => {
          watcher = this.etcd.watch().prefix(prefix).watcher()
          attach()
        }, 500)
        onChange()
      })
    }
    attach()
    return {
      cancel: async () => {
        cancelled = true
        clearTimeout(retry)
        // etcd3 waits for etcd to confirm the cancel: an unreachable etcd must not hang a shutdown
        let timer: NodeJS.Timeout | undefined
        const gaveUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, 1000)))
        await Promise.race([watcher.cancel().catch(() => undefined), gaveUp])
        clearTimeout(timer)
      },
    }
  }

  close(): void {
    this.etcd.close()
  }
}
