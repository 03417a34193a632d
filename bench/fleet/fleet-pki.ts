/**
 * The PKI of a fleet run, made with our own toolkit at run time: a CA, an EC server certificate, one
 * P-256 node bundle per name through the `issue --names` batch, and an operator bundle. Revocations go
 * through the real CLI (`pxe-pki revoke`), as an operator would run it.
 */
import { execFile } from 'node:child_process'
import { access, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { issueBundle, issueBundles } from '../../pki/bundle-issue.js'
import { initPki } from '../../pki/init-pki.js'
import { issueServerCert } from '../../pki/issue-certs.js'
import { parseNamesFile } from '../../pki/names-file.js'
import { writeCrl } from '../../pki/revocation.js'

const PKI_CLI = fileURLToPath(new URL('../../pki/cli.js', import.meta.url))

/** What the run needs from the PKI. */
export interface FleetPki {
  readonly dir: string
  /** Folder holding one bundle folder per node name. */
  readonly bundles: string
  readonly ca: string
  readonly jwks: unknown
  readonly operator: { readonly cert: string; readonly key: string }
}

/** The controller config's `tls` and `plan_keys` over the PKI's own files (revocations reach crl.pem at once). */
export function controllerFiles(pkiDir: string): { tls: Record<string, string>; plan_keys: string } {
  const at = (name: string) => join(pkiDir, name)
  return { tls: { ca: at('ca.pem'), cert: at('server.pem'), key: at('server-key.pem'), crl: at('crl.pem') }, plan_keys: at('plan-keys.json') }
}

/** Makes the PKI under `root/pki` and the node bundles under `root/bundles`; `progress` gets one line now and then. */
export async function makeFleetPki(root: string, names: readonly string[], progress: (line: string) => void): Promise<FleetPki> {
  const dir = join(root, 'pki')
  const bundles = join(root, 'bundles')
  await initPki(dir)
  await issueServerCert(dir, { dns: ['localhost'], ip: ['127.0.0.1'], keyType: 'ec' })
  // The same path as `pxe-pki issue --names FILE --role node --key-type ec`.
  const namesFile = join(root, 'names.txt')
  await writeFile(namesFile, `${names.join('\n')}\n`)
  const { entries, problems } = parseNamesFile(await readFile(namesFile, 'utf8'))
  let lastReport = 0
  await issueBundles(dir, entries, 'node', {
    keyType: 'ec',
    outDir: bundles,
    source: namesFile,
    problems,
    onProgress: (phase, done, total) => {
      const now = Date.now()
      if (done !== total && now - lastReport < 2000) return
      lastReport = now
      progress(`${phase} ${done}/${total} node bundles`)
    },
  })
  await issueBundle(dir, OPERATOR, 'operator', { keyType: 'ec', outDir: join(root, 'operator') })
  return readFleetPki(root)
}

const OPERATOR = 'fleet-operator'

/** Reads a PKI that makeFleetPki made under `root`. */
async function readFleetPki(root: string): Promise<FleetPki> {
  const dir = join(root, 'pki')
  const read = (path: string) => readFile(path, 'utf8')
  const operatorDir = join(root, 'operator', OPERATOR)
  return {
    dir,
    bundles: join(root, 'bundles'),
    ca: await read(join(dir, 'ca.pem')),
    jwks: JSON.parse(await read(join(dir, 'plan-jwks.json'))) as unknown,
    operator: { cert: await read(join(operatorDir, 'cert.pem')), key: await read(join(operatorDir, 'key.pem')) },
  }
}

/**
 * The PKI under `root` if an earlier run made it with these very names (the names file matches and the
 * last bundle exists), with a fresh CRL (its nextUpdate may have passed); else null.
 */
export async function reuseFleetPki(root: string, names: readonly string[]): Promise<FleetPki | null> {
  try {
    if ((await readFile(join(root, 'names.txt'), 'utf8')) !== `${names.join('\n')}\n`) return null
    await access(join(root, 'bundles', names[names.length - 1]!, 'key.pem'))
  } catch {
    return null
  }
  await writeCrl(join(root, 'pki'))
  return readFleetPki(root)
}

/** `pxe-pki revoke <name> --dir DIR` as a child process; rejects with its stderr on failure. */
export function revokeWithCli(pkiDir: string, name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [PKI_CLI, 'revoke', name, '--reason', 'cessationOfOperation', '--dir', pkiDir], (err, _stdout, stderr) => {
      if (err) reject(new Error(`pxe-pki revoke ${name} failed: ${stderr.trim() || err.message}`))
      else resolve()
    })
  })
}
