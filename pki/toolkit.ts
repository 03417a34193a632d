/**
 * The operator PKI toolkit's programmatic API; the CLI (cli.ts) is a thin wrapper over it, and tests of
 * other parts build their certificates with it at run time.
 */
export { initPki } from './init-pki.js'
export type { InitOptions } from './init-pki.js'
export { issueServerCert, issueBundle, issueBundles, signCsr, DEFAULT_LEAF_DAYS } from './issue-certs.js'
export type { ServerCertOptions, BundleOptions, BatchOptions, IssuedBundle, SignCsrOptions, SignedCsr } from './issue-certs.js'
export { parseNamesFile } from './names-file.js'
export type { NameEntry } from './names-file.js'
export { KEY_TYPES } from './keys.js'
export type { KeyType } from './keys.js'
export { revoke, writeCrl, listCerts } from './revocation.js'
export type { RevokeTarget, RevokeOptions, CrlOptions, CertEntry } from './revocation.js'
export { rotatePlanKey, exportController } from './controller-files.js'
export type { ExportOptions } from './controller-files.js'
export { planKeysFileSchema, publicJwks } from './plan-keys.js'
export type { PlanKeysFile, PlanPrivateJwk, PlanPublicJwk } from './plan-keys.js'
export { pkiIndexSchema, readIndex } from './index-file.js'
export type { PkiIndex, CertRecord, CertRole, ClientRole } from './index-file.js'
export { REVOCATION_REASONS, DEFAULT_CRL_DAYS } from './crl.js'
export { DEFAULT_CA_DAYS } from './ca.js'
export { PKI_FILES, BUNDLE_FILES, CONTROLLER_FILES, DEFAULT_PKI_DIR } from './layout.js'
export { PkiError, UsageError } from './errors.js'
