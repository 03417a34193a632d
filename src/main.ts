/**
 * Process entry: parse flags → config (file or development default) → start → stop on signals.
 * Exit status: 0 stopped (or --help, --version); 1 the start failed (config, files, state); 2 usage
 * error (a bad command line); 130/143 a second SIGINT/SIGTERM during a stop.
 */
import { pino, type Logger } from 'pino'
import { ArgvError, parseArgv } from './cli-kit/argv.js'
import { endQuietlyOnClosedPipe } from './cli-kit/closed-pipe.js'
import { versionLine } from './cli-kit/version.js'
import { loadConfig, type Config } from './config.js'
import { DEV_DEFAULT_PORT, assertLoopback, devCurlCommand, devEnrollCommands, devMetricsCommand, prepareDevDefault } from './dev-default.js'
import { gcTuningLogEntry, tuneGarbageCollection } from './gc-tuning.js'
import { captureProcessWarnings } from './log/process-warnings.js'
import { runtimeWarning } from './node-runtime.js'
import { DEFAULT_STOP_GRACE_MS, startController, type RunningController } from './runtime.js'

// Node's own warning lines would be plain text among the JSON log lines.
const processWarnings = captureProcessWarnings('pxe-controller')
// `pxe-controller --help | head -3`: the reader's leaving ends the process quietly, not with an EPIPE
// stack trace. The logs go through pino's own descriptor; this is about --help, --version and the
// development banner.
endQuietlyOnClosedPipe()
// Before any connection: how V8 counts TLS connections' native memory (gc-tuning.ts). Logged only once
// the config loaded, so that a config error is the only line a failed start prints.
const gcTuning = tuneGarbageCollection()

const HELP = `Usage: pxe-controller [--config FILE]
       npm start -- [--config FILE]

Starts the Discord-PXE controller (mutual TLS only).

  --config FILE   production: a JSON config (see deploy/controller.example.json); relative
                  paths in it are relative to FILE
  --var DIR       development default only: where the dev PKI, state and audit log live (./var)
  --host HOST     development default only: loopback address to listen on (127.0.0.1)
  --port PORT     development default only: port (${DEV_DEFAULT_PORT}; 0 picks a free one)
  -h, --help      this text
  -V, --version   print "pxe-controller <version>" and exit

Without --config the controller runs on its embedded development default: a PKI created once
under ./var/pki, listening on 127.0.0.1 only, and it prints a curl command that checks in as
the development node.

Exit status: 0 stopped by SIGTERM or SIGINT (or --help, --version); 1 the start failed (the config, a
file, the state; the reason on stderr, one line); 2 usage error (unknown flag, missing or bad value);
130 or 143 a second SIGINT or SIGTERM during a stop.`

/** Exit statuses (also in --help). */
const EXIT = { failed: 1, usage: 2 } as const

/** A start that failed: the reason, one line, exit 1. */
function fail(message: string): never {
  process.stderr.write(`pxe-controller: ${message}\n`)
  process.exit(EXIT.failed)
}

/** A bad command line: the problem, one line, a hint to --help, exit 2 (as the other bins). */
function usage(message: string): never {
  process.stderr.write(`pxe-controller: ${message}\nRun "pxe-controller --help" for usage.\n`)
  process.exit(EXIT.usage)
}

const FLAGS = {
  config: { type: 'string' },
  var: { type: 'string' },
  host: { type: 'string' },
  port: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'V' },
} as const

/** The command line, checked whole before anything is read or created. */
interface Flags {
  readonly help: boolean
  readonly version: boolean
  /** null: the development default. */
  readonly config: string | null
  readonly varDir: string
  readonly host: string
  readonly port: number
}

function parseFlags(argv: readonly string[]): Flags {
  let parsed
  try {
    parsed = parseArgv(argv, FLAGS, { allowPositionals: false })
  } catch (err) {
    if (err instanceof ArgvError) usage(err.message)
    throw err
  }
  const v = parsed.values as Partial<Record<'config' | 'var' | 'host' | 'port', string> & Record<'help' | 'version', boolean>>
  const flags = { help: v.help === true, version: v.version === true, config: v.config ?? null, varDir: v.var ?? 'var', host: v.host ?? '127.0.0.1', port: DEV_DEFAULT_PORT }
  if (flags.help || flags.version) return flags
  for (const name of ['config', 'var', 'host', 'port'] as const) if (v[name] === '') usage(`--${name} needs a value`)
  if (flags.config !== null) {
    if (v.var !== undefined || v.host !== undefined || v.port !== undefined) usage('--var, --host and --port are for the development default; set listen in the config file')
    return flags
  }
  const port = v.port === undefined ? DEV_DEFAULT_PORT : /^\d{1,5}$/.test(v.port) ? Number(v.port) : NaN
  if (!(port >= 0 && port <= 65535)) usage(`--port must be an integer 0..65535, got ${JSON.stringify(v.port?.slice(0, 32))}`)
  try {
    assertLoopback(flags.host)
  } catch (err) {
    usage((err as Error).message)
  }
  return { ...flags, port }
}

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2))
  if (flags.help) {
    process.stdout.write(`${HELP}\n`)
    return
  }
  if (flags.version) {
    process.stdout.write(`${versionLine('pxe-controller')}\n`)
    return
  }
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'info', base: { service: 'pxe-controller' } })
  let config: Config
  const dev = flags.config === null
  if (flags.config === null) config = await prepareDevDefault(flags.varDir, flags.host, flags.port, (line) => logger.info(line))
  else config = await loadConfig(flags.config)
  // The config is good: from here on the log says what the process runs with.
  processWarnings.attach(logger)
  const gcLog = gcTuningLogEntry(gcTuning)
  logger.info(gcLog.fields, gcLog.message)
  const runtime = runtimeWarning(process.versions.node)
  if (runtime !== null) logger.warn(runtime.fields, runtime.message)
  const running = await startController(config, { logger })
  logger.info({ host: config.listen.host, port: running.port, mode: dev ? 'development' : 'production' }, 'controller listening (mTLS)')
  if (dev) {
    process.stdout.write(`\nDevelopment controller on https://${config.listen.host}:${running.port} — check in as the dev node:\n\n${devCurlCommand(flags.varDir, config.listen.host, running.port)}\n\n`)
    if (running.opsPort !== null) process.stdout.write(`Metrics, health and readiness (plain HTTP, loopback):\n\n${devMetricsCommand(config.listen.host, running.opsPort)}\n\n`)
    if (running.enrollPort !== null) process.stdout.write(`Or enroll a node with no certificate (a token, the node, one pass of the signer):\n\n${devEnrollCommands(flags.varDir, config.listen.host, running.port, running.enrollPort)}\n\n`)
  }
  handleStopSignals(running, logger)
}

/** Exit codes of a stop cut short by a second signal (128 + signal number, as a shell reports it). */
const SIGNAL_EXIT_CODES = { SIGTERM: 143, SIGINT: 130 } as const

/**
 * The first SIGTERM or SIGINT stops gracefully (requests in flight finish, state is made durable,
 * `controller_stop` is audited) and exits 0; a second one exits at once, non-zero.
 */
function handleStopSignals(running: RunningController, logger: Logger): void {
  let stopping = false
  const stop = (signal: keyof typeof SIGNAL_EXIT_CODES) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting at once; requests in flight are dropped, state is as last written')
      process.exit(SIGNAL_EXIT_CODES[signal])
    }
    stopping = true
    logger.info({ signal, graceMs: DEFAULT_STOP_GRACE_MS }, 'stopping: no new connections, finishing requests in flight (send the signal again to exit at once)')
    running.stop().then(
      () => {
        logger.info('stopped: state durable, controller_stop audited')
        process.exit(0)
      },
      (err: Error) => fail(`stop failed: ${err.message}`),
    )
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
}

main().catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)))
