/** The fixed file layout of a PKI directory; the controller and other tools rely on these names. */
import { join } from 'node:path'

/** File names inside the PKI directory. */
export const PKI_FILES = {
  index: 'index.json',
  lock: '.lock',
  caCert: 'ca.pem',
  caKey: 'ca-key.pem',
  crl: 'crl.pem',
  serverCert: 'server.pem',
  serverKey: 'server-key.pem',
  planKeys: 'plan-keys.json',
  planJwks: 'plan-jwks.json',
  bundles: 'bundles',
  /** Bootstrap tokens with their secrets (0600, like the CA key): pki/token-store.ts. */
  tokens: 'tokens.json',
} as const

/** File names inside one identity bundle folder. */
export const BUNDLE_FILES = {
  key: 'key.pem',
  cert: 'cert.pem',
  ca: 'ca.pem',
  planJwks: 'plan-jwks.json',
} as const

/** The five files `export-controller` writes, in the order it writes them. */
export const CONTROLLER_FILES = [
  PKI_FILES.caCert,
  PKI_FILES.serverCert,
  PKI_FILES.serverKey,
  PKI_FILES.crl,
  PKI_FILES.planKeys,
] as const

/** Absolute path of a file in the PKI directory. */
export function pkiPath(dir: string, file: string): string {
  return join(dir, file)
}

/** Default PKI directory, relative to the working directory (SPEC "Operator PKI CLI"). */
export const DEFAULT_PKI_DIR = './var/pki'
