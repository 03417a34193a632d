/**
 * "The controller" of a run: one ControllerChild, or with --ha two replicas on one etcd. A restart or a
 * reshard stops and starts every replica (the whole control plane down, its state kept in etcd); a
 * take-over kills only the leader (churn-runner.ts).
 */
import type { ControllerChild } from './controller-process.js'

/** Every replica of the run, in the order the agents' controller lists name them. */
export class ControllerSet {
  constructor(readonly replicas: readonly ControllerChild[]) {
    if (replicas.length === 0) throw new Error('a run needs a controller')
  }

  /** The ports, in order (after the first start). */
  get ports(): number[] {
    return this.replicas.map((r) => r.port)
  }

  /** A process ID while any replica runs (null: the whole control plane is down). */
  get pid(): number | null {
    return this.replicas.map((r) => r.pid).find((p) => p !== null) ?? null
  }

  /** Starts every replica (see ControllerChild.start); resolves once all listen. */
  async start(extraNodeArgs: readonly string[] = [], overrides: Readonly<Record<string, unknown>> = {}): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.start(extraNodeArgs, overrides)))
  }

  /** kill -9 of every replica. */
  async kill9(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.kill9()))
  }

  /** SIGTERM to every replica; resolves once all are gone. */
  async stop(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.stop()))
  }

  /** Kills what still runs and closes the logs. */
  async close(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.close()))
  }
}
