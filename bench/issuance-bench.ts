/**
 * Issuance at fleet scale (issue 11 item 4): `issue --names` through the toolkit's own code path, into a
 * temporary PKI — 500 EC P-256 node bundles, then a smaller RSA-2048 batch (RSA key generation dominates).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { initPki } from '../pki/init-pki.js'
import { issueBundles } from '../pki/bundle-issue.js'
import type { KeyType } from '../pki/keys.js'

const EC_BUNDLES = 500
const RSA_BUNDLES = 40
/** The issue's target for P-256 node bundles. */
const EC_TARGET_PER_SECOND = 50

/** Issues `count` node bundles with `keyType` in one run; returns bundles per second over the whole run. */
async function issueRun(pkiDir: string, outDir: string, keyType: KeyType, count: number): Promise<number> {
  const entries = Array.from({ length: count }, (_, i) => ({ name: `${keyType}-node-${String(i).padStart(5, '0')}`, line: i + 1 }))
  const started = performance.now()
  await issueBundles(pkiDir, entries, 'node', { keyType, outDir, source: 'bench' })
  return count / ((performance.now() - started) / 1000)
}

/** Prints bundles per second for P-256 and RSA-2048 node bundles. */
export async function runIssuanceBench(log: (line: string) => void): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'pxe-issuance-bench-'))
  try {
    const pkiDir = join(root, 'pki')
    await initPki(pkiDir)
    log(`issuance bench: "issue --names" into a fresh PKI (RSA 3072 CA), every bundle written and fsynced`)
    const ec = await issueRun(pkiDir, join(root, 'ec'), 'ec', EC_BUNDLES)
    const verdict = ec >= EC_TARGET_PER_SECOND ? 'meets' : 'MISSES'
    log(`  EC P-256:  ${EC_BUNDLES} node bundles, ${ec.toFixed(0).padStart(5)} bundles/s (${verdict} the target of ${EC_TARGET_PER_SECOND}/s)`)
    const rsa = await issueRun(pkiDir, join(root, 'rsa'), 'rsa', RSA_BUNDLES)
    log(`  RSA 2048:  ${RSA_BUNDLES} node bundles, ${rsa.toFixed(1).padStart(5)} bundles/s (key generation bound)`)
  } finally {
    await rm(root, { recursive: true, force: true })
  }
}
