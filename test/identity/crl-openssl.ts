/**
 * Test helper: a throwaway OpenSSL CA (`openssl ca` with index, serial and crlnumber files) in a temp
 * directory, so CRLs and certificates are made by an outside tool, not by the code under test.
 */
import { execFileSync } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** A CA made by the OpenSSL CLI. */
export interface OpensslCa {
  readonly dir: string
  readonly config: string
  readonly certPem: string
  readonly cert: X509Certificate
}

/** A leaf issued by an `OpensslCa`. */
export interface IssuedCert {
  readonly certPath: string
  readonly certPem: string
  readonly keyPem: string
  readonly cert: X509Certificate
}

function openssl(args: string[]): string {
  return execFileSync('openssl', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
}

function caConfig(dir: string): string {
  return `[ ca ]
default_ca = CA_default
[ CA_default ]
dir = ${dir}
database = $dir/index.txt
new_certs_dir = $dir/newcerts
certificate = $dir/ca.pem
private_key = $dir/ca-key.pem
serial = $dir/serial
crlnumber = $dir/crlnumber
default_md = sha256
default_days = 30
default_crl_days = 7
policy = policy_any
unique_subject = no
copy_extensions = none
x509_extensions = client_ext
crl_extensions = crl_ext
[ policy_any ]
commonName = supplied
organizationalUnitName = optional
[ client_ext ]
basicConstraints = CA:false
keyUsage = digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[ server_ext ]
basicConstraints = CA:false
keyUsage = digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[ crl_ext ]
authorityKeyIdentifier = keyid:always
[ ca_ext ]
basicConstraints = critical, CA:true, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
`
}

/** A temp directory removed when the test ends. */
export function tempDir(t: { teardown(fn: () => void): void }, prefix = 'crl-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Creates a CA under `dir/name` (`keyAlg` "rsa" → RSA 2048, "ec" → P-256). */
export function makeCa(dir: string, name: string, keyAlg: 'rsa' | 'ec' = 'rsa'): OpensslCa {
  const caDir = join(dir, name)
  mkdirSync(join(caDir, 'newcerts'), { recursive: true })
  writeFileSync(join(caDir, 'index.txt'), '')
  writeFileSync(join(caDir, 'serial'), '1000\n')
  writeFileSync(join(caDir, 'crlnumber'), '01\n')
  const config = join(caDir, 'openssl.cnf')
  writeFileSync(config, caConfig(caDir))
  const newkey = keyAlg === 'rsa' ? ['-newkey', 'rsa:2048'] : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256']
  openssl(['req', '-x509', ...newkey, '-nodes', '-subj', `/CN=${name} test CA`, '-days', '30',
    '-config', config, '-extensions', 'ca_ext', '-keyout', join(caDir, 'ca-key.pem'), '-out', join(caDir, 'ca.pem')])
  const certPem = readFileSync(join(caDir, 'ca.pem'), 'utf8')
  return { dir: caDir, config, certPem, cert: new X509Certificate(certPem) }
}

/** Issues a P-256 leaf; `serialHex` sets the next serial (e.g. one with the high bit set). */
export function issue(ca: OpensslCa, cn: string, opts: { serialHex?: string; server?: boolean } = {}): IssuedCert {
  if (opts.serialHex !== undefined) writeFileSync(join(ca.dir, 'serial'), `${opts.serialHex}\n`)
  const keyPath = join(ca.dir, `${cn}-key.pem`)
  const csrPath = join(ca.dir, `${cn}.csr`)
  const certPath = join(ca.dir, `${cn}.pem`)
  openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-subj', `/CN=${cn}/OU=node`, '-keyout', keyPath, '-out', csrPath])
  openssl(['ca', '-batch', '-config', ca.config, '-notext', '-in', csrPath, '-out', certPath,
    ...(opts.server === true ? ['-extensions', 'server_ext'] : [])])
  const certPem = readFileSync(certPath, 'utf8')
  return { certPath, certPem, keyPem: readFileSync(keyPath, 'utf8'), cert: new X509Certificate(certPem) }
}

/** Marks a certificate revoked in the CA database (takes effect in the next CRL). */
export function revoke(ca: OpensslCa, cert: IssuedCert, reason = 'keyCompromise'): void {
  openssl(['ca', '-config', ca.config, '-revoke', cert.certPath, '-crl_reason', reason])
}

/** How `genCrl` dates the CRL (default: now, plus 7 days). */
export interface CrlOptions {
  readonly days?: number
  readonly hours?: number
  readonly lastUpdate?: Date
  readonly nextUpdate?: Date
  readonly v1?: boolean
}

function asn1Time(d: Date): string {
  return `${d.toISOString().replace(/[-:T]/g, '').slice(0, 14)}Z`
}

/**
 * Generates a CRL (the CA's crlnumber grows each time); `hours` overrides the 7-day default;
 * `v1` makes a version 1 CRL: no extensions, so no CRL number.
 */
export function genCrl(ca: OpensslCa, opts: CrlOptions = {}): string {
  const validity = opts.hours !== undefined ? ['-crlhours', String(opts.hours)]
    : opts.nextUpdate !== undefined ? ['-crl_nextupdate', asn1Time(opts.nextUpdate)]
      : ['-crldays', String(opts.days ?? 7)]
  if (opts.lastUpdate !== undefined) validity.push('-crl_lastupdate', asn1Time(opts.lastUpdate))
  let config = ca.config
  if (opts.v1 === true) {
    config = join(ca.dir, 'openssl-v1.cnf')
    writeFileSync(config, readFileSync(ca.config, 'utf8').replace(/^(crlnumber|crl_extensions) = .*$/gm, ''))
  }
  return openssl(['ca', '-config', config, '-gencrl', ...validity])
}
