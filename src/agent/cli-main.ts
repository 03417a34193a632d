/**
 * `pxe-node`: the node agent as a process. Flags → bundle → agent with shell-command callbacks →
 * (the metrics listener) → run until SIGTERM/SIGINT (the node leaves: every shard stopped, its session
 * deposited, the controller told; exit 0; a second signal stops at once, also 0) or a definitive
 * refusal of the certificate (every shard stopped, the reason on stderr, exit 3). Definitive: every
 * controller URL refused the certificate on new connections, twice in a row (a TLS alert naming it, a
 * 401, or closing the connection right after the TLS handshake, as a Node controller refuses a revoked
 * or expired one; controller-client.ts). A refusal by some controllers only is logged at warn and the
 * agent keeps trying; the fail-safe stops the shards meanwhile (no exit).
 * With --enroll instead of a bundle: token and CA file → (the state folder's identity, or) enrollment,
 * polling until the signer answers (a signal ends the wait, exit 0; a denial exits 3) → the same agent.
 */
import { X509Certificate } from 'node:crypto'
import { pino, type Logger } from 'pino'
import { collectDefaultMetrics } from 'prom-client'
import { versionLine } from '../cli-kit/version.js'
import { parseCliArgs, HELP, UsageError, type CliArgs } from './cli-args.js'
import { FileGenerationStore, MemoryGenerationStore, StateFileError } from './generation-store.js'
import { readFile } from 'node:fs/promises'
import { IdentityError, loadBundle, loadBundleJwks, type NodeIdentity } from './identity.js'
import { enrolledIdentity } from './enrolled-identity.js'
import { EnrollmentAbortedError, EnrollmentDeniedError, EnrollmentRefusedError } from './enrollment.js'
import { readToken, TokenSourceError } from './token-source.js'
import type { EnrollToken } from '../core/enroll-token.js'
import { NodeAgent } from './node-agent.js'
import type { AgentEvent } from './agent-events.js'
import { MetricsListenError, MetricsServer } from './metrics-server.js'
import { runShardCommand } from './shard-command.js'
import { RestProxyUnavailableError, startRestProxy, type RestProxy } from '../rest/index.js'

/** Exit statuses (also in --help). */
export const EXIT = { ok: 0, startup: 1, usage: 2, refused: 3, stopTimeout: 4 } as const

/** Where the CLI writes: injectable for tests. */
export interface CliIo {
  readonly stdout: (text: string) => void
  readonly stderr: (text: string) => void
  /** The process's warnings (cli.ts captures them); they are logged once the logger exists. */
  readonly warnings?: { attach(logger: Logger): void }
}

function buildAgent(args: CliArgs, identity: NodeIdentity, logger: Logger, keep: ((identity: NodeIdentity) => Promise<void>) | null, restProxy: RestProxy | null): NodeAgent {
  // Where plan-jwks.json is read again after a plan-key rotation: the bundle, or the state folder.
  const jwksDir = args.enroll === null ? args.bundle : args.enroll.stateDir
  const generationStore = args.stateFile === null ? new MemoryGenerationStore() : new FileGenerationStore(args.stateFile, identity.nodeId)
  let agent: NodeAgent | null = null
  const onEvent = (event: AgentEvent) => {
    // After a plan-key rotation the operator copies the new plan-jwks.json into the bundle.
    if (event.type === 'plan_refused' && event.reason === 'unknown_kid' && jwksDir !== null) {
      loadBundleJwks(jwksDir).then(
        (keys) => agent?.setPinnedKeys(keys),
        (err: Error) => logger.error({ err: err.message }, 'cannot re-read plan-jwks.json'),
      )
    }
  }
  agent = new NodeAgent({
    identity,
    controllers: args.controllers,
    capacity: args.capacity,
    clockSkewMs: args.clockSkewMs,
    ...(args.stopTimeoutMs === null ? {} : { stopTimeoutMs: args.stopTimeoutMs }),
    generationStore,
    logger,
    onEvent,
    ...(keep === null ? {} : { onIdentityRenewed: keep }),
    ...(restProxy === null ? {} : { restProxy }),
    onStart: async (ctx) => {
      if (args.onStart !== null) await runShardCommand(args.onStart, 'start', ctx, logger)
    },
    onStop: (ctx) => (args.onStop === null ? undefined : runShardCommand(args.onStop, 'stop', ctx, logger)),
  })
  return agent
}

/** Runs the CLI; resolves with the exit status. */
export async function main(argv: string[], io: CliIo): Promise<number> {
  let args: CliArgs
  try {
    args = parseCliArgs(argv)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    io.stderr(`pxe-node: ${err.message}\nRun "pxe-node --help" for usage.\n`)
    return EXIT.usage
  }
  if (args.help) {
    io.stdout(HELP)
    return EXIT.ok
  }
  if (args.version) {
    io.stdout(`${versionLine('pxe-node')}\n`)
    return EXIT.ok
  }
  const enrollInput = args.enroll === null ? null : await enrollInputs(args, io)
  if (typeof enrollInput === 'number') return enrollInput
  let identity: NodeIdentity | null = null
  if (enrollInput === null) {
    try {
      identity = await loadBundle(args.bundle)
    } catch (err) {
      if (!(err instanceof IdentityError)) throw err
      io.stderr(`pxe-node: cannot use bundle ${args.bundle}: ${err.message}\n`)
      return EXIT.startup
    }
  }
  const logger = pino({ level: args.logLevel, base: { pid: process.pid } }, pino.destination({ fd: 1, sync: true }))
  io.warnings?.attach(logger)
  let keep: ((identity: NodeIdentity) => Promise<void>) | null = null
  if (identity === null) {
    const enrolled = await enrollUntilIssued(args, enrollInput!, logger, io)
    if (typeof enrolled === 'number') return enrolled
    ;({ identity, keep } = enrolled)
  }
  if (args.stateFile === null) logger.warn('no --state-file: the last accepted generation is kept in memory only, so a restart forgets the rollback floor')
  const restProxy = await startProxy(args, logger, io)
  if (typeof restProxy === 'number') return restProxy
  const agent = buildAgent(args, identity, logger, keep, restProxy)
  let metrics: MetricsServer | null
  try {
    metrics = await serveMetrics(args, agent, logger)
  } catch (err) {
    await restProxy?.close()
    if (!(err instanceof MetricsListenError)) throw err
    io.stderr(`pxe-node: ${err.message}\n`)
    return EXIT.startup
  }
  // Registered before the start, so that a signal during it still stops cleanly. The first signal leaves
  // (SPEC "Leaving on purpose": every shard stopped, their sessions deposited, the controller told); a
  // second one stops at once, without waiting for slow stops or for the controller.
  let signals = 0
  const onSignal = (signal: string) => {
    signals += 1
    if (signals === 1) {
      logger.info({ signal }, 'signal received: leaving (every shard stopped, the controller told); a second signal stops at once')
      void agent.leave()
    } else if (signals === 2) {
      logger.warn({ signal }, 'second signal received: stopping at once')
      void agent.stopNow()
    }
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  try {
    return await runUntilStopped(agent, io)
  } finally {
    process.off('SIGTERM', onSignal)
    process.off('SIGINT', onSignal)
    await metrics?.close()
    await restProxy?.close()
  }
}

/** Starts the REST proxy when asked for (before the agent: it holds every request until a plan gives a share); an exit status when it cannot. */
async function startProxy(args: CliArgs, logger: Logger, io: CliIo): Promise<RestProxy | null | number> {
  if (args.restProxy === null) return null
  const { listen, upstream } = args.restProxy
  try {
    return await startRestProxy({ listen, logger, ...(upstream === null ? {} : { upstream }) })
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (err instanceof RestProxyUnavailableError) io.stderr(`pxe-node: --rest-proxy: ${err.message}\n`)
    else if (typeof code === 'string' && code.startsWith('E')) io.stderr(`pxe-node: --rest-proxy: cannot listen on ${listen.host}:${listen.port} (${code})\n`)
    else throw err
    return EXIT.startup
  }
}

/** The token and the CA file of --enroll, read once; an exit status when one cannot be used. */
async function enrollInputs(args: CliArgs, io: CliIo): Promise<{ token: EnrollToken; ca: string } | number> {
  const { token: source, caFile } = args.enroll!
  let token: EnrollToken
  try {
    token = await readToken(source)
  } catch (err) {
    if (!(err instanceof TokenSourceError)) throw err
    io.stderr(`pxe-node: ${err.message}\n`)
    return EXIT.startup
  }
  let ca: string
  try {
    ca = await readFile(caFile, 'utf8')
    new X509Certificate(ca)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    io.stderr(`pxe-node: cannot use the CA file ${caFile}: ${code === undefined ? 'not a PEM certificate' : `cannot read it (${code})`}\n`)
    return EXIT.startup
  }
  return { token, ca }
}

/** Enrolls (or reuses the state folder's identity); a signal ends the wait (exit 0), a denial exits 3. */
async function enrollUntilIssued(args: CliArgs, input: { token: EnrollToken; ca: string }, logger: Logger, io: CliIo): Promise<{ identity: NodeIdentity; keep: ((identity: NodeIdentity) => Promise<void>) | null } | number> {
  const { urls, name, stateDir } = args.enroll!
  const abort = new AbortController()
  const onSignal = (signal: string) => {
    logger.info({ signal }, 'signal received: enrollment abandoned')
    abort.abort()
  }
  process.once('SIGTERM', onSignal)
  process.once('SIGINT', onSignal)
  try {
    logger.info({ enroll: urls, name, token_id: input.token.id, state_dir: stateDir }, 'node agent enrolling')
    return await enrolledIdentity({ enrollUrls: urls, token: input.token, name, ca: input.ca, signal: abort.signal, ...(stateDir === null ? {} : { stateDir }) }, logger)
  } catch (err) {
    if (err instanceof EnrollmentAbortedError) return EXIT.ok
    if (err instanceof EnrollmentDeniedError || err instanceof EnrollmentRefusedError) {
      logger.error({ err: err.message }, 'enrollment refused')
      io.stderr(`pxe-node: ${err.message}\n`)
      return EXIT.refused
    }
    if (err instanceof IdentityError) {
      logger.error({ err: err.message }, 'enrollment failed')
      io.stderr(`pxe-node: ${err.message}\n`)
      return EXIT.startup
    }
    throw err
  } finally {
    process.off('SIGTERM', onSignal)
    process.off('SIGINT', onSignal)
  }
}

/** Starts the metrics listener when asked for (before the agent, so that a port in use starts nothing). */
async function serveMetrics(args: CliArgs, agent: NodeAgent, logger: Logger): Promise<MetricsServer | null> {
  if (args.metrics === null) return null
  // The process is this agent's alone, so its process metrics belong with the agent's.
  collectDefaultMetrics({ register: agent.metrics })
  const server = await MetricsServer.start(args.metrics.host, args.metrics.port, agent.metrics, logger)
  const { host, port } = server.address
  logger.info({ metrics_host: host, metrics_port: port }, 'metrics listener started')
  return server
}

/** Starts the agent and waits for its end; a damaged state file stops it before any check-in. */
async function runUntilStopped(agent: NodeAgent, io: CliIo): Promise<number> {
  try {
    await agent.start()
  } catch (err) {
    if (!(err instanceof StateFileError)) throw err
    io.stderr(`pxe-node: ${err.message}\n`)
    await agent.stop()
    return EXIT.startup
  }
  const end = await agent.closed
  if (end.reason !== 'shutdown') io.stderr(`pxe-node: ${end.detail}\n`)
  return end.reason === 'shutdown' ? EXIT.ok : end.reason === 'certificate_refused' ? EXIT.refused : EXIT.stopTimeout
}
