/**
 * What one connection costs at the ceiling (raw node:https + node:crypto with the controller's TLS
 * settings, bench/mtls-target.ts), measured in the same run as the fleet's phases: this machine's speed
 * changes by a factor of two from one hour to the next, so a phase's CPU means something only next to
 * what the least possible work would have cost at that hour. Uses the fleet's own PKI (P-256), with the
 * mTLS bench's own node names (the ceiling answers only those), issued once into `<pki>/bundles-ec`.
 */
import { chmod, copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { measureCeilingCosts, type CeilingCosts } from '../../mtls-handshake.js'
import { checkinRequest, type Identity } from '../../mtls-client.js'
import { startTarget, stopTarget } from '../../mtls-process.js'
import { makeNodes } from '../../mtls-bench.js'
import type { FleetPki } from '../fleet-pki.js'

export type { CeilingCosts } from '../../mtls-handshake.js'

/** Starts the ceiling on a copy of the fleet's server files, measures it, stops it, removes the copy. */
export async function ceilingCosts(pki: FleetPki): Promise<CeilingCosts> {
  const root = await mkdtemp(join(tmpdir(), 'pxe-fleet-ceiling-'))
  try {
    const dir = join(root, 'pki')
    await mkdir(dir, { mode: 0o700 })
    for (const name of ['ca.pem', 'crl.pem', 'plan-keys.json']) await copyFile(join(pki.dir, name), join(dir, name))
    await copyFile(join(pki.dir, 'server.pem'), join(dir, 'server-ec.pem'))
    await copyFile(join(pki.dir, 'server-key.pem'), join(dir, 'server-ec-key.pem'))
    await chmod(join(dir, 'server-ec-key.pem'), 0o600)
    const ids: Identity[] = await makeNodes(pki.dir, 'ec')
    const ceiling = await startTarget('ceiling', 'ec', root)
    try {
      return await measureCeilingCosts(ceiling, ids, ids.map((id) => checkinRequest(id.name, undefined)), Buffer.from(pki.ca))
    } finally {
      await stopTarget(ceiling)
    }
  } finally {
    await rm(root, { recursive: true, force: true }) // a copy of the server's private key
  }
}

/** The CPU (s) `full` full and `resumed` resumed connections cost at the ceiling. */
export function atCeiling(costs: CeilingCosts, full: number, resumed: number): number {
  return (full * costs.fullMs + resumed * costs.resumedMs) / 1000
}
