/**
 * The controller of the bench's product run, as production runs it: `node dist/src/main.js --config FILE`
 * in a child process (bench/fleet/controller-process.ts), over a PKI made at run time with our own
 * toolkit (bench/fleet/fleet-pki.ts: a CA, a server certificate, one node bundle per node), with the
 * `rest` section of the scenario and a short lease so that check-ins (every lease/3) carry demand and
 * shares often.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { identityFromPem, type NodeIdentity } from '../../src/agent/identity.js'
import { ControllerChild } from '../fleet/controller-process.js'
import { controllerFiles, makeFleetPki } from '../fleet/fleet-pki.js'
import { REST_CONFIG } from './figures.js'

/** The controller settings of the scenario (both the bench and the test use them). */
export function scenarioSettings(leaseSeconds: number): Record<string, unknown> {
  return {
    // The agents run no shards of their own worth speaking of: a few, so that plans exist.
    total_shards: 4,
    max_concurrency: 4,
    lease_seconds: leaseSeconds,
    identify_interval_ms: 5000,
    rest: { ...REST_CONFIG },
  }
}

/** A controller child and the nodes' identities. */
export interface ProductController {
  readonly urls: readonly string[]
  readonly identities: ReadonlyMap<string, NodeIdentity>
  readonly logPath: string
  stop(): Promise<void>
}

/** Makes the PKI under `root`, starts the controller and loads the identities of `names`. */
export async function startProductController(root: string, names: readonly string[], leaseSeconds: number, progress: (line: string) => void): Promise<ProductController> {
  const pki = await makeFleetPki(root, names, progress)
  const logPath = join(root, 'controller.log')
  const child = new ControllerChild({
    configPath: join(root, 'controller.json'),
    config: {
      listen: { host: '127.0.0.1', port: 0 },
      ...controllerFiles(pki.dir),
      state_dir: join(root, 'state'),
      audit_log: join(root, 'audit.log'),
      controller_id: 'rest-bench',
      // nothing reads it here; off, so that nothing else holding its default port can stop the run
      ops: null,
      ...scenarioSettings(leaseSeconds),
    },
    logPath,
    onUnexpectedExit: (code) => progress(`the controller exited by itself (${code}); see ${logPath}`),
  })
  await child.start()
  const identities = new Map<string, NodeIdentity>()
  for (const name of names) {
    const read = (file: string) => readFile(join(pki.bundles, name, file), 'utf8')
    identities.set(name, await identityFromPem({ cert: await read('cert.pem'), key: await read('key.pem'), ca: pki.ca, jwks: pki.jwks }))
  }
  return { urls: [`https://127.0.0.1:${child.port}`], identities, logPath, stop: () => child.close() }
}
