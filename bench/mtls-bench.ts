/**
 * The mTLS section of `npm run bench`: check-ins on keep-alive connections (mtls-checkin.ts) and new
 * connections, full and resumed (mtls-handshake.ts), against the controller and a ceiling (raw
 * node:https + node:crypto, mtls-target.ts), each target in its own process. Makes the PKI with our
 * toolkit: a CA, an RSA-2048 and a P-256 server certificate, 32 node bundles of each key type.
 */
import { chmod, copyFile, mkdtemp, readFile, rm } from 'node:fs/promises'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { initPki } from '../pki/init-pki.js'
import { issueBundles, issueServerCert } from '../pki/issue-certs.js'
import { checkinRequest, type Identity } from './mtls-client.js'
import { joinAll, runCheckinSection } from './mtls-checkin.js'
import { runHandshakeSection, type HandshakeFleet } from './mtls-handshake.js'
import { KEY_LABEL, startTarget, stopTarget, type ServerKey, type Target } from './mtls-process.js'
import { BENCH_NODES, BENCH_RATE_LIMITS, benchNodeName } from './mtls-shared.js'

type Log = (line: string) => void

const fmtLoad = (): string => loadavg().map((l) => l.toFixed(2)).join(', ')

/** `server-<key>.pem` and `server-<key>-key.pem` under `pkiDir`, as mtls-target.ts expects them. */
export async function makeServerCert(pkiDir: string, key: ServerKey): Promise<void> {
  await issueServerCert(pkiDir, { dns: ['localhost'], ip: ['127.0.0.1'], keyType: key })
  await copyFile(join(pkiDir, 'server.pem'), join(pkiDir, `server-${key}.pem`))
  const keyFile = join(pkiDir, `server-${key}-key.pem`)
  await copyFile(join(pkiDir, 'server-key.pem'), keyFile)
  await chmod(keyFile, 0o600)
}

/** 32 node bundles named bench-node-NN with `key` keys, in their own folder (the names repeat across key types). */
export async function makeNodes(pkiDir: string, key: ServerKey): Promise<Identity[]> {
  const entries = Array.from({ length: BENCH_NODES }, (_, i) => ({ name: benchNodeName(i), line: i + 1 }))
  const issued = await issueBundles(pkiDir, entries, 'node', { keyType: key, outDir: join(pkiDir, `bundles-${key}`), replace: true, source: 'bench' })
  return Promise.all(issued.map(async (b) => ({ name: b.name, cert: await readFile(join(b.bundleDir, 'cert.pem')), key: await readFile(join(b.bundleDir, 'key.pem')) })))
}

/** Starts both targets of a key type, joins its nodes to the controller and returns the fleet. */
async function startFleet(root: string, key: ServerKey, ids: readonly Identity[], ca: Buffer, targets: Target[]): Promise<HandshakeFleet> {
  const controller = await startTarget('controller', key, root)
  targets.push(controller)
  const ceiling = await startTarget('ceiling', key, root)
  targets.push(ceiling)
  // The controller's steady state: every node has joined and reports the generation it was given,
  // so check-ins change nothing and write nothing (as in production between rebalances).
  const generation = await joinAll(controller, ca, ids, (id, g) => checkinRequest(id.name, g))
  return { key, controller, ceiling, ids, requests: ids.map((id) => checkinRequest(id.name, generation)) }
}

/** Makes the PKI, starts the targets, runs both parts and prints the figures (with the machine's load). */
export async function runMtlsBench(log: Log): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'pxe-mtls-bench-'))
  const targets: Target[] = []
  try {
    const pkiDir = join(root, 'pki')
    log(`mTLS bench: ${BENCH_NODES} distinct node certificates, 127.0.0.1; Node ${process.version}, OpenSSL ${process.versions.openssl}; machine load (1/5/15 min) at start: ${fmtLoad()} on ${availableParallelism()} cores`)
    const limit = BENCH_RATE_LIMITS.node
    log(`  rate limits configured out of the way: ${limit.per_second.toLocaleString('en-US')}/s, burst ${limit.burst.toLocaleString('en-US')} per certificate (checked on every request, never refusing); metrics on, as in production`)
    log(`  server CPU = user + system time of the whole target process (every thread) over the measured window, read with process.cpuUsage() over IPC`)
    log(`  making a PKI, ${KEY_LABEL.rsa} and ${KEY_LABEL.ec} server certificates and ${BENCH_NODES} node bundles of each with pki/ (RSA key generation, up to half a minute)…`)
    await initPki(pkiDir)
    for (const key of ['rsa', 'ec'] as const) await makeServerCert(pkiDir, key)
    const rsaIds = await makeNodes(pkiDir, 'rsa')
    const ecIds = await makeNodes(pkiDir, 'ec')
    const ca = await readFile(join(pkiDir, 'ca.pem'))

    const rsa = await startFleet(root, 'rsa', rsaIds, ca, targets)
    const ec = await startFleet(root, 'ec', ecIds, ca, targets)
    await runCheckinSection(log, rsa.controller, rsa.ceiling, ca, rsa.ids, rsa.requests)
    await runHandshakeSection(log, [rsa, ec], ca)
    log(`  machine load (1/5/15 min) at end: ${fmtLoad()}`)
  } finally {
    await Promise.all(targets.map(stopTarget))
    await rm(root, { recursive: true, force: true }) // the bench's private keys do not outlive it
  }
}
