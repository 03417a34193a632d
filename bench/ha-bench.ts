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
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { initPki } from '../pki/init-pki.js'
import { makeNodes, makeServerCert } from './mtls-bench.js'
import { fmtMs, fmtRate, joinAll, runRound, summarize, type RoundResult } from './mtls-checkin.js'
import { checkinRequest } from './mtls-client.js'
import { startTarget, stopTarget, type Target } from './mtls-process.js'

const ROUNDS = 3
type Log = (line: string) => void

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
    const pkiDir = join(root, 'pki')
    log('  making a PKI, an RSA-2048 server certificate and 32 node bundles with pki/…')
    await initPki(pkiDir)
    await makeServerCert(pkiDir, 'rsa')
    const ids = await makeNodes(pkiDir, 'rsa')
    const ca = await readFile(join(pkiDir, 'ca.pem'))
    targets.push(await startTarget('controller', 'rsa', root), await startTarget('controller-ha', 'rsa', root, [haFile]))
    const generations = await Promise.all(targets.map((target) => joinAll(target, ca, ids, (id, g) => checkinRequest(id.name, g))))
    for (const load of ['steady', 'writing'] as const) {
      // `writing`: every connection alternates two bodies, reporting g and then g - 1, so every check-in
      // changes its node record and its answer waits for a write.
      const requests = targets.map((_, t) => ids.map((id) => checkinRequest(id.name, generations[t]!)))
      const results = new Map<Target, RoundResult[]>(targets.map((t) => [t, []]))
      for (const [t, target] of targets.entries()) await runRound(target, ca, ids, requests[t]!, 1500, load === 'writing' ? (id, i) => checkinRequest(id.name, generations[t]! - (i % 2)) : undefined) // JIT warm-up, discarded
      for (let round = 1; round <= ROUNDS; round++) {
        for (const target of round % 2 === 1 ? targets : [...targets].reverse()) {
          const t = targets.indexOf(target)
          results.get(target)!.push(await runRound(target, ca, ids, requests[t]!, undefined, load === 'writing' ? (id, i) => checkinRequest(id.name, generations[t]! - (i % 2)) : undefined))
        }
      }
      for (const target of targets) {
        const s = summarize(results.get(target)!)
        const name = target.kind === 'controller' ? 'file store' : 'etcd (HA)'
        log(`  ${load.padEnd(8)} ${name.padEnd(11)} ${fmtRate(s.perSecond)}  p50 ${fmtMs(s.p50)}  p99 ${fmtMs(s.p99)}  controller CPU ${s.cpuPerCheckin.toFixed(0).padStart(4)} µs per check-in (etcd's own CPU not included)`)
      }
    }
  } finally {
    await Promise.all(targets.map(stopTarget))
    await rm(root, { recursive: true, force: true })
  }
}
