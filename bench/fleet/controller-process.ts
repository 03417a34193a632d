/**
 * The controller under test, as production runs it: `node dist/src/main.js --config FILE` in a child
 * process, killed with SIGKILL (or stopped with SIGTERM) and started again on the same port and state,
 * possibly with another config (a reshard restart). Its stdout (pino lines) goes to a log file in the
 * run folder.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createWriteStream, type WriteStream } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { onInterrupt } from './interrupt.js'

/** The compiled controller entry. */
export const CONTROLLER_MAIN = fileURLToPath(new URL('../../src/main.js', import.meta.url))

const LISTENING = /"port":(\d+),"mode":"[a-z]+","msg":"controller listening/

/** Options of a controller child. */
export interface ControllerChildOptions {
  /** Where the config file is written. */
  readonly configPath: string
  /** The config object (its listen.port is replaced by the port in use after the first start). */
  readonly config: Record<string, unknown>
  /** Where stdout and stderr are appended. */
  readonly logPath: string
  /** Extra node flags (e.g. --cpu-prof). */
  readonly nodeArgs?: readonly string[]
  readonly startTimeoutMs?: number
  /** Called when the process ends without being told to (a crash). */
  readonly onUnexpectedExit?: (code: number | string) => void
}

/** One controller, started, killed and restarted by the orchestrator. */
export class ControllerChild {
  private child: ChildProcess | null = null
  private exited: Promise<number | string> = Promise.resolve(0)
  private log: WriteStream
  private portInUse: number | null = null
  private lastStartedPid: number | null = null
  private told = false
  private config: Record<string, unknown>
  private readonly unregister = onInterrupt(() => this.child?.kill('SIGKILL'))

  constructor(private readonly opts: ControllerChildOptions) {
    this.log = createWriteStream(opts.logPath, { flags: 'a' })
    this.config = opts.config
  }

  /** The config of the last start (overrides included). */
  get currentConfig(): Readonly<Record<string, unknown>> {
    return this.config
  }

  /** The port it listens on (after the first start). */
  get port(): number {
    if (this.portInUse === null) throw new Error('the controller was not started')
    return this.portInUse
  }

  /** The process ID of the last start (also after it exited). */
  get lastPid(): number | null {
    return this.lastStartedPid
  }

  /** The process ID while it runs. */
  get pid(): number | null {
    return this.child?.pid ?? null
  }

  /**
   * Starts it (on the port of the first start, if any), with extra node flags for this start, and
   * config overrides that stay for the later starts too (a reshard's total_shards must survive the
   * next plain restart); resolves once it listens.
   */
  async start(extraNodeArgs: readonly string[] = [], overrides: Readonly<Record<string, unknown>> = {}): Promise<void> {
    this.config = { ...this.config, ...overrides }
    const listen = { ...(this.config.listen as object), ...(this.portInUse === null ? {} : { port: this.portInUse }) }
    await writeFile(this.opts.configPath, JSON.stringify({ ...this.config, listen }, null, 2), { mode: 0o600 })
    const child = spawn(process.execPath, [...(this.opts.nodeArgs ?? []), ...extraNodeArgs, CONTROLLER_MAIN, '--config', this.opts.configPath], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'info' },
    })
    this.child = child
    this.lastStartedPid = child.pid ?? null
    this.told = false
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        const result = code ?? signal ?? -1
        if (!this.told) this.opts.onUnexpectedExit?.(result)
        resolve(result)
      }),
    )
    child.stderr!.pipe(this.log, { end: false })
    this.portInUse = await this.waitListening(child)
  }

  private waitListening(child: ChildProcess): Promise<number> {
    const timeoutMs = this.opts.startTimeoutMs ?? 60_000
    let seen = ''
    let done = false
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the controller did not listen within ${timeoutMs} ms (see ${this.opts.logPath})`)), timeoutMs)
      child.stderr!.on('data', (chunk: Buffer) => {
        if (!done) seen += chunk.toString('utf8')
      })
      child.stdout!.on('data', (chunk: Buffer) => {
        this.log.write(chunk)
        if (done) return
        seen += chunk.toString('utf8')
        const m = LISTENING.exec(seen)
        if (m) {
          done = true
          clearTimeout(timer)
          seen = ''
          resolve(Number(m[1]))
        }
      })
      void this.exited.then((code) => {
        clearTimeout(timer)
        // the run folder (and its log) may be gone by the time anyone looks: say what it said last
        const last = seen.trim().split('\n').slice(-2).join(' | ').slice(0, 600)
        reject(new Error(`the controller exited (${code}) before listening (see ${this.opts.logPath}): ${last || 'no output'}`))
      })
    })
  }

  /** kill -9, and resolves once the process is gone. */
  async kill9(): Promise<void> {
    this.told = true
    this.child?.kill('SIGKILL')
    await this.exited
    this.child = null
  }

  /** SIGTERM (a graceful stop); resolves with the exit code. */
  async stop(): Promise<number | string> {
    if (this.child === null) return 0
    this.told = true
    this.child.kill('SIGTERM')
    const code = await this.exited
    this.child = null
    return code
  }

  /** Kills the process if it still runs and closes the log file. */
  async close(): Promise<void> {
    this.unregister()
    if (this.child !== null) await this.kill9()
    await new Promise<void>((resolve) => this.log.end(resolve))
  }
}
