/** Process entry: parse flags → config (file or development default) → start → stop on signals. */
import { parseArgs } from 'node:util'
import { pino, type Logger } from 'pino'
import { ConfigError, loadConfig, type Config } from './config.js'
import { DEV_DEFAULT_PORT, devCurlCommand, devMetricsCommand, prepareDevDefault } from './dev-default.js'
import { gcTuningLogEntry, tuneGarbageCollection } from './gc-tuning.js'
import { captureProcessWarnings } from './log/process-warnings.js'
import { DEFAULT_STOP_GRACE_MS, startController, type RunningController } from './runtime.js'

// Node's own warning lines would be plain text among the JSON log lines.
const processWarnings = captureProcessWarnings('pxe-controller')
// Before any connection: how V8 counts TLS connections' native memory (gc-tuning.ts).
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

Without --config the controller runs on its embedded development default: a PKI created once
under ./var/pki, listening on 127.0.0.1 only, and it prints a curl command that checks in as
the development node.`

function fail(message: string): never {
  process.stderr.write(`pxe-controller: ${message}\n`)
  process.exit(1)
}

function parseFlags() {
  try {
    return parseArgs({
      options: {
        config: { type: 'string' },
        var: { type: 'string' },
        host: { type: 'string' },
        port: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }).values
  } catch (err) {
    return fail(`${(err as Error).message} (see --help)`)
  }
}

async function main(): Promise<void> {
  const flags = parseFlags()
  if (flags.help) {
    process.stdout.write(`${HELP}\n`)
    return
  }
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'info', base: { service: 'pxe-controller' } })
  processWarnings.attach(logger)
  const gcLog = gcTuningLogEntry(gcTuning)
  logger.info(gcLog.fields, gcLog.message)
  let config: Config
  const dev = flags.config === undefined
  const varDir = flags.var ?? 'var'
  if (dev) {
    const port = flags.port === undefined ? DEV_DEFAULT_PORT : Number(flags.port)
    if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--port must be an integer 0..65535, got "${flags.port}"`)
    config = await prepareDevDefault(varDir, flags.host ?? '127.0.0.1', port, (line) => logger.info(line))
  } else {
    if (flags.var || flags.host || flags.port) fail('--var, --host and --port are for the development default; set listen in the config file')
    config = await loadConfig(flags.config as string)
  }
  const running = await startController(config, { logger })
  logger.info({ host: config.listen.host, port: running.port, mode: dev ? 'development' : 'production' }, 'controller listening (mTLS)')
  if (dev) {
    process.stdout.write(`\nDevelopment controller on https://${config.listen.host}:${running.port} — check in as the dev node:\n\n${devCurlCommand(varDir, config.listen.host, running.port)}\n\n`)
    if (running.opsPort !== null) process.stdout.write(`Metrics, health and readiness (plain HTTP, loopback):\n\n${devMetricsCommand(config.listen.host, running.opsPort)}\n\n`)
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

main().catch((err: unknown) => {
  if (err instanceof ConfigError || err instanceof Error) fail(err.message)
  fail(String(err))
})
