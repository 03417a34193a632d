/**
 * The embedded development default: a PKI under `<var>/pki` made once with the operator toolkit
 * (CA, server cert for localhost, a node and an operator bundle) and a loopback-only config.
 */
import { access } from 'node:fs/promises'
import { join, relative, resolve } from 'node:path'
import { initPki } from '../pki/init-pki.js'
import { issueBundle, issueServerCert } from '../pki/issue-certs.js'
import { BUNDLE_FILES, PKI_FILES } from '../pki/layout.js'
import { parseConfig, type Config } from './config.js'
import { hostForUrl, isLoopbackHost } from './net/host.js'

export const DEV_NODE = 'dev-node-1'
export const DEV_OPERATOR = 'dev-operator'
/** The development signer (the CA host's `pxe-pki signer`, run by hand for enrollment). */
export const DEV_SIGNER = 'dev-signer'
/** The enrollment listener's port in development (with `--port 0`, a free one). */
export const DEV_DEFAULT_ENROLL_PORT = 8444
export const DEV_DEFAULT_PORT = 8443
/** The ops endpoint's port in development; with `--port 0` (or this port) it picks a free one too. */
export const DEV_DEFAULT_OPS_PORT = 9464

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  )
}

/** Development mode listens on loopback only: anything else is refused. */
export function assertLoopback(host: string): void {
  if (!isLoopbackHost(host)) {
    throw new Error(`development mode listens on loopback only; refusing host "${host}" (use --config for a production deployment)`)
  }
}

/** Creates whatever part of the development PKI is missing; reuses what exists. */
async function ensureDevPki(pkiDir: string, progress: (line: string) => void): Promise<void> {
  if (!(await exists(join(pkiDir, PKI_FILES.index)))) {
    progress(`creating a development CA in ${pkiDir} (once)`)
    await initPki(pkiDir)
  }
  if (!(await exists(join(pkiDir, PKI_FILES.serverCert)))) {
    progress('issuing the development server certificate (localhost, 127.0.0.1, ::1)')
    await issueServerCert(pkiDir, { dns: ['localhost'], ip: ['127.0.0.1', '::1'] })
  }
  for (const [name, role] of [[DEV_NODE, 'node'], [DEV_OPERATOR, 'operator'], [DEV_SIGNER, 'signer']] as const) {
    if (!(await exists(join(pkiDir, PKI_FILES.bundles, name, BUNDLE_FILES.cert)))) {
      progress(`issuing the development ${role} bundle ${name}`)
      await issueBundle(pkiDir, name, role, { replace: true }) // a dev bundle deleted by hand is simply issued again
    }
  }
}

/** Prepares `<varDir>` and returns the development config. */
export async function prepareDevDefault(varDir: string, host: string, port: number, progress: (line: string) => void): Promise<Config> {
  assertLoopback(host)
  const pkiDir = resolve(varDir, 'pki')
  await ensureDevPki(pkiDir, progress)
  return parseConfig(
    {
      listen: { host, port },
      tls: { ca: 'pki/ca.pem', cert: 'pki/server.pem', key: 'pki/server-key.pem', crl: 'pki/crl.pem' },
      plan_keys: 'pki/plan-keys.json',
      state_dir: 'state',
      audit_log: 'audit.log',
      controller_id: 'pxe-controller-dev',
      total_shards: 16,
      max_concurrency: 1,
      // Same loopback host as the API: development never serves anything beyond this machine.
      ops: { host, port: port === 0 || port === DEV_DEFAULT_OPS_PORT ? 0 : DEV_DEFAULT_OPS_PORT },
      enroll: { host, port: port === 0 || port === DEV_DEFAULT_ENROLL_PORT ? 0 : DEV_DEFAULT_ENROLL_PORT },
    },
    resolve(varDir),
    'development config',
  )
}

/** A ready-to-paste curl command that checks in as the development node. */
export function devCurlCommand(varDir: string, host: string, port: number): string {
  const bundle = relative(process.cwd(), resolve(varDir, 'pki', PKI_FILES.bundles, DEV_NODE)) || '.'
  const body = JSON.stringify({ node_id: DEV_NODE, capacity: 16, ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 })
  return [
    `curl --cacert ${bundle}/${BUNDLE_FILES.ca} --cert ${bundle}/${BUNDLE_FILES.cert} --key ${bundle}/${BUNDLE_FILES.key} \\`,
    `  -H 'content-type: application/json' -d '${body}' \\`,
    `  https://${hostForUrl(host)}:${port}/v1/checkin`,
  ].join('\n')
}

/**
 * The commands that enroll a node with no certificate against the development controller: a token, the
 * signer (one pass), and the node itself (its key stays in memory).
 */
export function devEnrollCommands(varDir: string, host: string, port: number, enrollPort: number): string {
  const pki = relative(process.cwd(), resolve(varDir, 'pki')) || '.'
  const at = hostForUrl(host)
  return [
    `node bin/pxe-pki.js token create --dir ${pki} --names 'dev-enrolled-*' --uses 5 > ${pki}/dev-token`,
    `node bin/pxe-node.js --enroll https://${at}:${enrollPort} --token-file ${pki}/dev-token --name dev-enrolled-1 \\`,
    `  --ca-file ${pki}/${PKI_FILES.caCert} --controller https://${at}:${port} &`,
    `node bin/pxe-pki.js signer --once --dir ${pki} --controller https://${at}:${port} --bundle ${pki}/${PKI_FILES.bundles}/${DEV_SIGNER}`,
  ].join('\n')
}

/** A command that reads the development controller's metrics from its ops endpoint. */
export function devMetricsCommand(host: string, opsPort: number): string {
  return `curl http://${hostForUrl(host)}:${opsPort}/metrics`
}
