/**
 * pxe-ctl tests run the CLI against a controller started in this process over mTLS on 127.0.0.1, with a
 * PKI and bundles made at run time by our own toolkit. A command that runs to its end (`runCtl`,
 * `fleet.ctl`) runs `main()` in this process with its own output buffers and environment (HOME, the
 * context variable): the same code path as the bin minus the process start, which on Node 20 cost
 * about half a second per command (CI ran some 300 of them). Commands that wait or are interrupted
 * (`spawnCtl`, `fleet.spawn`: watch, drain --wait, signals) and the bin itself (the last test of
 * usage.test.ts, with its exit statuses) run the compiled CLI as a child process (dist/src/ctl/cli.js, built by `npm
 * test`; run `npm run build` first by hand), spawned asynchronously: the controller serves it from
 * this event loop.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import { issueBundle } from '../../pki/issue-certs.js'
import type { Io } from '../../src/ctl/io.js'
import { main } from '../../src/ctl/main.js'
import { bundle, checkinBody, makePki, request, startTestController, type Identity, type Pki, type TestController } from '../e2e/harness.js'
import { testDir } from '../support/test-dir.js'

export const CLI = fileURLToPath(new URL('../../dist/src/ctl/cli.js', import.meta.url))
if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" (npm test does it first)`)

/** What one run printed, and its exit status. */
export interface CtlResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** A pxe-ctl child that is still running (watch, drain --wait). */
export interface CtlChild {
  readonly child: ChildProcess
  readonly done: Promise<CtlResult>
  /** What it printed so far. */
  readonly output: () => { stdout: string; stderr: string }
}

/** Starts `pxe-ctl <args>` with HOME (and nothing of the user's own config) under `home`. */
export function spawnCtl(args: readonly string[], opts: { home: string; env?: Record<string, string> }): CtlChild {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: opts.home, NODE_OPTIONS: '', ...opts.env }
  const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d))
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d))
  const done = new Promise<CtlResult>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
  return { child, done, output: () => ({ stdout, stderr }) }
}

/**
 * Runs `pxe-ctl <args>` to its end in this process (see the top of this file), with HOME `opts.home`
 * and only `opts.env` besides; fails after 30 s. No signal handler is registered: an interrupt is for
 * the spawned CLI to test.
 */
export async function runCtl(args: readonly string[], opts: { home: string; env?: Record<string, string> }): Promise<CtlResult> {
  let stdout = ''
  let stderr = ''
  const io: Io = { out: (text) => void (stdout += `${text}\n`), err: (text) => void (stderr += `${text}\n`), isTTY: false }
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: opts.home, ...opts.env }
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`pxe-ctl ${args.join(' ')}: no end within 30 s`)), 30_000)
  })
  try {
    const code = await Promise.race([main(args, { io, env, onInterrupt: () => () => undefined }), timeout])
    return { code, stdout, stderr }
  } finally {
    clearTimeout(timer)
  }
}

/** A controller, an operator bundle and a context file naming them; `ctl(...)` runs pxe-ctl with it. */
export interface Fleet {
  readonly root: string
  readonly pki: Pki
  readonly controller: TestController
  readonly url: string
  readonly operatorBundle: string
  readonly contextFile: string
  readonly home: string
  ctl(...args: string[]): Promise<CtlResult>
  /** Starts pxe-ctl with the fleet's context without waiting for its end. */
  spawn(...args: string[]): CtlChild
  /** A node identity (issued once per name). */
  node(name: string): Promise<Identity>
  /** One check-in of `name` (capacity and generation as given); returns the plan's answer. */
  checkIn(name: string, extra?: Record<string, unknown>): Promise<any>
  /** GET /v1/plan with the operator's certificate (what the CLI should agree with). */
  plan(): Promise<any>
}

/** Writes a context file (mode 0600) for `controllers` and `bundleDir`. */
export function writeContext(path: string, controllers: readonly string[], bundleDir: string): void {
  writeFileSync(path, JSON.stringify({ controllers, bundle: bundleDir }), { mode: 0o600 })
}

/** Starts a controller with `overrides` (or those made from the PKI) and makes everything a pxe-ctl test needs around it. */
export async function startFleet(t: Test, overrides: Record<string, unknown> | ((pki: Pki) => Record<string, unknown>) = {}): Promise<Fleet> {
  const root = testDir(t)
  const pki = await makePki(root)
  const extra = typeof overrides === 'function' ? overrides(pki) : overrides
  const controller = await startTestController(pki, root, { total_shards: 64, max_concurrency: 16, ...extra })
  t.teardown(() => controller.running.stop())
  const { bundleDir } = await issueBundle(pki.dir, 'alice', 'operator', { outDir: join(root, 'bundles') })
  const operator = await bundle(pki, 'alice-view', 'operator')
  const home = join(root, 'home')
  mkdirSync(home)
  const url = `https://127.0.0.1:${controller.port}`
  const contextFile = join(root, 'context.json')
  writeContext(contextFile, [url], bundleDir)
  const nodes = new Map<string, Identity>()
  const fleet: Fleet = {
    root, pki, controller, url, operatorBundle: bundleDir, contextFile, home,
    ctl: (...args) => runCtl(['--context', contextFile, ...args], { home }),
    spawn: (...args) => spawnCtl(['--context', contextFile, ...args], { home }),
    async node(name) {
      if (!nodes.has(name)) nodes.set(name, await bundle(pki, name, 'node'))
      return nodes.get(name)!
    },
    async checkIn(name, extra = {}) {
      const res = await request(controller.port, pki.ca, await fleet.node(name), '/v1/checkin', { body: checkinBody(name, extra) })
      if (res.status !== 200) throw new Error(`check-in of ${name}: ${res.status} ${res.text}`)
      return res.json
    },
    async plan() {
      const res = await request(controller.port, pki.ca, operator, '/v1/plan')
      if (res.status !== 200) throw new Error(`plan: ${res.status} ${res.text}`)
      return res.json
    },
  }
  return fleet
}

/** Polls `check` every 50 ms until it is true; throws with `what` after `ms`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}
