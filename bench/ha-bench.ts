/**
 * Check-ins with the state on etcd (HA, one replica) next to the file store, same load: 32 keep-alive mTLS
 * connections with distinct node certificates (mtls-bench.ts), alternating round by round. Two loads:
 * `steady` (every node reports the generation it runs: nothing to write) and `writing` (every check-in
 * changes a node record, so every answer waits for a write: a journal fsync, or an etcd transaction).
 * Prints throughput, p50/p99 and the controller process's CPU per check-in (etcd's own CPU not included).
 *
 * Needs an etcd: PXE_BENCH_HA=<file with an "ha" config section>, e.g. the one `deploy/ha-local.sh DIR`
 * writes to DIR/ha.json (PXE_LOCAL_ETCD_ONLY=1 starts etcd alone). Without it the section says so and stops.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { checkinRequest, fmtMs, fmtRate, joinAll, makeBenchPki, runRound, startTarget, stopTarget, summarize, type RoundResult, type Target } from './mtls-bench.js'

const ROUNDS = 3
type Log = (line: string) => void

/** The target process's CPU time (user + system, µs), asked over IPC. */
function cpuOf(target: Target): Promise<number> {
  return new Promise((resolve) => {
    const onMessage = (msg: { cpu?: NodeJS.CpuUsage }) => {
      if (!msg.cpu) return
      target.child.off('message', onMessage)
      resolve(msg.cpu.user + msg.cpu.system)
    }
    target.child.on('message', onMessage)
    target.child.send({ cpu: true })
  })
}

/** Runs the `ha` section. */
export async function runHaBench(log: Log): Promise<void> {
  const haFile = process.env.PXE_BENCH_HA
  log('HA check-in bench: the controller with its state on etcd next to the file store')
  if (!haFile) {
    log('  skipped: set PXE_BENCH_HA to a file holding an "ha" section (deploy/ha-local.sh DIR writes DIR/ha.json)')
    return
  }
  const root = await mkdtemp(join(tmpdir(), 'pxe-ha-bench-'))
  const targets: Target[] = []
  try {
    const { ids, ca } = await makeBenchPki(root, log)
    targets.push(await startTarget('controller', root), await startTarget('controller-ha', root, [haFile]))
    const generations = await Promise.all(targets.map((target) => joinAll(target, ca, ids)))
    for (const load of ['steady', 'writing'] as const) {
      // `writing`: reporting g and g - 1 in turn changes the node record on every check-in
      const requests = targets.map((_, t) => ids.map((id) => (load === 'steady' ? [checkinRequest(id.name, generations[t])] : [checkinRequest(id.name, generations[t]), checkinRequest(id.name, generations[t]! - 1)])))
      const results = new Map<Target, { rounds: RoundResult[]; cpuUs: number }>(targets.map((t) => [t, { rounds: [], cpuUs: 0 }]))
      for (const [t, target] of targets.entries()) await runRound(target, ca, ids, requests[t]!, 1500) // JIT warm-up, discarded
      for (let round = 1; round <= ROUNDS; round++) {
        for (const target of round % 2 === 1 ? targets : [...targets].reverse()) {
          const before = await cpuOf(target)
          const result = await runRound(target, ca, ids, requests[targets.indexOf(target)]!)
          const entry = results.get(target)!
          entry.cpuUs += (await cpuOf(target)) - before
          entry.rounds.push(result)
        }
      }
      for (const target of targets) {
        const { rounds, cpuUs } = results.get(target)!
        const s = summarize(rounds)
        const answered = rounds.reduce((n, r) => n + r.total, 0)
        const name = target.kind === 'controller' ? 'file store' : 'etcd (HA)'
        log(`  ${load.padEnd(8)} ${name.padEnd(11)} ${fmtRate(s.perSecond)}  p50 ${fmtMs(s.p50)}  p99 ${fmtMs(s.p99)}  controller CPU ${(cpuUs / answered).toFixed(0).padStart(4)} µs per check-in`)
      }
    }
  } finally {
    await Promise.all(targets.map(stopTarget))
    await rm(root, { recursive: true, force: true })
  }
}
