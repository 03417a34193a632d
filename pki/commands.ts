/** The command table of `pxe-pki`: usage, help text, flags and a thin handler over the toolkit per command. */
import { expectPositionals, listFlag, stringFlag } from './args.js'
import type { OptionDefs, ParsedArgs } from './args.js'
import { initPki, issueServerCert, revoke, writeCrl, listCerts, rotatePlanKey, exportController } from './toolkit.js'
import type { CertEntry } from './toolkit.js'
import { REVOCATION_REASONS } from './crl.js'
import { intFlag, runIssue, runSignCsr } from './issue-command.js'
import type { HandlerContext } from './issue-command.js'
import { ALLOWED_KEY_BITS, DEFAULT_LEAF_KEY_BITS, checkKeySpec, describeKeySpec } from './keys.js'
import { DEFAULT_CA_DAYS } from './ca.js'
import { DEFAULT_CRL_DAYS } from './crl.js'
import { DEFAULT_LEAF_DAYS } from './leaf.js'
import type { KeyType } from './keys.js'
import { PkiError, UsageError } from './errors.js'
import { verifyAuditFile } from '../src/audit/verify-file.js'
import { SIGNER_COMMAND } from './signer-command.js'
import { TOKEN_GROUP } from './token-commands.js'
import { ENROLL_GROUP } from './enroll-commands.js'

/** Where a command writes: `print` for its result (stdout), `notice` for progress and notes (stderr). */
export type CommandContext = HandlerContext

/** One flag of a command: how it parses, the placeholder of its value in the help, and what it does. */
export interface FlagSpec {
  readonly type: 'string' | 'boolean'
  readonly multiple?: boolean
  /** The value's placeholder in the help (string flags), e.g. `N` or `FILE`. */
  readonly value?: string
  readonly help: string
}

/** One command of the CLI. */
export interface Command {
  readonly usage: string
  readonly summary: string
  readonly details: string
  /** Every flag the command takes besides --dir and --help; its --help lists each one. */
  readonly options: Readonly<Record<string, FlagSpec>>
  /** False for commands that need no PKI directory (audit-verify). */
  readonly usesDir: boolean
  readonly run: (args: ParsedArgs, ctx: CommandContext) => Promise<void>
}

/** A command group (`token create`, `enroll list`): a summary and its subcommands, each a Command. */
export interface CommandGroup {
  readonly summary: string
  readonly details: string
  readonly commands: Readonly<Record<string, Command>>
}

const str = (value: string, help: string): FlagSpec => ({ type: 'string', value, help })
const many = (value: string, help: string): FlagSpec => ({ type: 'string', multiple: true, value, help })
const flag = (help: string): FlagSpec => ({ type: 'boolean', help })

/** The flags as node:util parseArgs takes them. */
export function optionDefs(options: Readonly<Record<string, FlagSpec>>): OptionDefs {
  const defs: OptionDefs = {}
  for (const [name, spec] of Object.entries(options)) defs[name] = spec.multiple ? { type: spec.type, multiple: true } : { type: spec.type }
  return defs
}

const ROLE = str('node|operator|signer', 'the role the certificate grants (required); signer: the enrollment signer of the CA host')
const DAYS = str('N', `validity of the certificate in days (default ${DEFAULT_LEAF_DAYS})`)
const KEY_TYPE = str('rsa|ec', 'the key type: rsa (default) or ec (P-256, cheaper TLS handshakes)')
const KEY_BITS = str('N', `RSA key size: ${ALLOWED_KEY_BITS.join(', ')} (default ${DEFAULT_LEAF_KEY_BITS}); not with --key-type ec`)
const CRL_DAYS = str('N', `validity of the new CRL in days: its nextUpdate (default ${DEFAULT_CRL_DAYS})`)
const REPLACE = flag('issue even though the name holds a valid certificate (a planned rotation; revoke the old one by serial afterwards)')

function listTable(certs: readonly CertEntry[]): string {
  const rows = certs.map((c) => `${c.serial}  ${c.status.padEnd(7)}  ${c.role.padEnd(8)}  ${c.not_after}  ${c.name}`)
  return [`${'serial'.padEnd(32)}  status   role      not_after                 name`, ...rows].join('\n')
}

/** Every command, by its name on the command line. */
export const COMMANDS: Readonly<Record<string, Command>> = {
  init: {
    usage: 'init [--ca-days N]',
    summary: 'create the CA, an empty CRL and the first plan key; refuses to overwrite',
    details: 'Creates the PKI directory (mode 0700) with an RSA 3072 CA (10 years by default; key ca-key.pem, mode 0600),\nCRL number 1 and the first Ed25519 plan key. Refuses a directory that is not empty.',
    options: { 'ca-days': str('N', `validity of the CA certificate in days (default ${DEFAULT_CA_DAYS})`) },
    usesDir: true,
    run: async (args, ctx) => {
      expectPositionals('init', args, 0, 0, 'no argument')
      await initPki(ctx.dir, { caDays: intFlag(args, 'ca-days') })
      ctx.print(`created PKI in ${ctx.dir} (CA certificate ${ctx.dir}/ca.pem; keep ca-key.pem offline if you can)`)
    },
  },
  'server-cert': {
    usage: 'server-cert --dns H[,H] --ip A[,A] [--days N] [--key-type rsa|ec] [--key-bits N]',
    summary: "issue the controller's TLS certificate (serverAuth) with those SANs",
    details: 'Writes server.pem and server-key.pem (mode 0600), replacing the previous ones (which stay valid\nuntil they expire or are revoked by serial). --dns and --ip may be repeated or comma-separated; 90 days by default.\n--key-type ec makes a P-256 key (cheaper TLS handshakes); rsa (default) makes an RSA key of --key-bits (2048).',
    options: {
      dns: many('H[,H]', 'DNS names the nodes dial (repeat the flag or separate by commas)'),
      ip: many('A[,A]', 'IP addresses the nodes dial (repeat the flag or separate by commas)'),
      days: DAYS,
      'key-type': KEY_TYPE,
      'key-bits': KEY_BITS,
    },
    usesDir: true,
    run: async (args, ctx) => {
      expectPositionals('server-cert', args, 0, 0, 'no argument')
      const keyType = stringFlag(args, 'key-type') as KeyType | undefined
      const keyBits = intFlag(args, 'key-bits')
      const key = describeKeySpec(checkKeySpec(keyType, keyBits))
      const r = await issueServerCert(ctx.dir, { dns: listFlag(args, 'dns'), ip: listFlag(args, 'ip'), days: intFlag(args, 'days'), keyType, keyBits })
      ctx.print(`issued server certificate ${r.serial} (${key}): ${ctx.dir}/server.pem, key ${ctx.dir}/server-key.pem`)
    },
  },
  issue: {
    usage: 'issue <name> | issue --names FILE  --role node|operator|signer [--days N] [--out DIR] [--key-type rsa|ec] [--key-bits N] [--replace]',
    summary: 'issue a certificate and write the bundle folder DIR/<name>/ (or one per line of FILE)',
    details: [
      'Makes a new key pair and a certificate with subject CN=<name>, OU=<role> (clientAuth, 90 days by default)',
      'and writes DIR/<name>/ (DIR defaults to <pki>/bundles; folders made here are 0700, an existing DIR keeps its',
      'mode): key.pem (0600, PKCS#8), cert.pem, ca.pem, plan-jwks.json. The name follows the name rule: 1-64 of',
      'A-Z a-z 0-9 - _ ., starting with a letter or digit.',
      '--key-type ec makes a P-256 key; rsa (default) an RSA key of --key-bits (2048, 3072 or 4096).',
      '--names FILE issues one bundle per line of FILE (blank lines and # comments skipped) in one run; every name',
      'is checked first and on any problem (named by its line) nothing is issued. Progress goes to stderr.',
      'A name that holds a valid certificate (not expired, not revoked, any role) is refused, and so is an existing',
      'bundle folder, unless --replace: then the old bundle folder is moved to <name>.replaced-<serial>, the index',
      'records the serials replaced, and the old certificate stays valid until you revoke it ("revoke --serial").',
      'Role signer is the bundle of "pxe-pki signer" and "pxe-pki enroll" on the CA host: a controller lets it pull and',
      'answer enrollment requests and push CRLs, and nothing else.',
    ].join('\n'),
    options: {
      role: ROLE,
      days: DAYS,
      out: str('DIR', 'where the bundle folders go (default <pki>/bundles)'),
      'key-type': KEY_TYPE,
      'key-bits': KEY_BITS,
      names: str('FILE', 'issue one bundle per line of FILE instead of one <name>'),
      replace: REPLACE,
    },
    usesDir: true,
    run: runIssue,
  },
  'sign-csr': {
    usage: 'sign-csr <file> --role node|operator|signer [--days N] [--out FILE] [--replace]',
    summary: 'sign a CSR made on the device (its key never leaves it)',
    details: [
      "Checks the CSR's own signature (RSA 2048+ keys, EC P-256/P-384 keys), takes only its CN (which must pass the",
      'name rule) and its public key; the role comes from --role and every extension is set by the CA. Prints the',
      'certificate, or writes it to FILE (never overwritten).',
      'A CN that holds a valid certificate (not expired, not revoked, any role) is refused unless --replace; the',
      'index then records the serials replaced, which stay valid until you revoke them ("revoke --serial").',
    ].join('\n'),
    options: {
      role: ROLE,
      days: DAYS,
      out: str('FILE', 'write the certificate to FILE (never overwritten) instead of stdout'),
      replace: REPLACE,
    },
    usesDir: true,
    run: runSignCsr,
  },
  revoke: {
    usage: 'revoke <name> | revoke --serial HEX  [--reason R] [--crl-days N] [--out FILE]',
    summary: 'revoke every unexpired certificate of a name, or one certificate; rewrites <pki>/crl.pem (and FILE) at once',
    details: [
      'Marks the certificates revoked in the index and writes the next CRL to <pki>/crl.pem (7 days by default)',
      'and, with --out, to FILE too (atomically). A controller that reads <pki>/crl.pem itself enforces it within',
      '2 s; one that reads a copy needs that copy replaced, or the CRL pushed: pxe-ctl crl push FILE.',
      `Reasons: ${Object.keys(REVOCATION_REASONS).join(', ')} (default unspecified).`,
      'Serials are hex; case and colons are ignored.',
    ].join('\n'),
    options: {
      serial: str('HEX', 'revoke this one certificate instead of every certificate of a name'),
      reason: str('R', 'the CRL reason code (default unspecified; the list is above)'),
      'crl-days': CRL_DAYS,
      out: str('FILE', 'also write the new CRL to FILE (atomically), e.g. the copy a controller reads or one to push'),
    },
    usesDir: true,
    run: async (args, ctx) => {
      const serial = stringFlag(args, 'serial')
      expectPositionals('revoke', args, serial === undefined ? 1 : 0, serial === undefined ? 1 : 0, 'a name or --serial HEX (not both)')
      const target = serial === undefined ? { name: args.positionals[0]! } : { serial }
      const out = stringFlag(args, 'out')
      const r = await revoke(ctx.dir, target, { reason: stringFlag(args, 'reason'), crlDays: intFlag(args, 'crl-days'), out })
      ctx.print(`revoked ${r.revoked.join(', ')}; wrote CRL number ${r.crlNumber} to ${ctx.dir}/crl.pem${out === undefined ? '' : ` and ${out}`}`)
    },
  },
  list: {
    usage: 'list [--json]',
    summary: 'every issued certificate with its status (reads only)',
    details: 'Prints serial, status (valid, revoked, expired), role, expiry and name of every certificate of this PKI.\n--json prints an array of {serial, name, role, not_before, not_after, status}.',
    options: { json: flag('print a JSON array instead of the table') },
    usesDir: true,
    run: async (args, ctx) => {
      expectPositionals('list', args, 0, 0, 'no argument')
      const certs = await listCerts(ctx.dir)
      ctx.print(args.values.json === true ? JSON.stringify(certs, null, 2) : listTable(certs))
    },
  },
  crl: {
    usage: 'crl [--out FILE] [--crl-days N]',
    summary: 'write a fresh CRL to <pki>/crl.pem (and FILE)',
    details: 'Signs the next CRL (X.509 v2, PEM label "X509 CRL", CRL number incremented) valid for 7 days by default.\nRun it before nextUpdate passes: OpenSSL refuses every client once the CRL in force has expired.',
    options: { out: str('FILE', 'also write the CRL to FILE (e.g. the copy you ship to the controllers)'), 'crl-days': CRL_DAYS },
    usesDir: true,
    run: async (args, ctx) => {
      expectPositionals('crl', args, 0, 0, 'no argument')
      const out = stringFlag(args, 'out')
      const r = await writeCrl(ctx.dir, { out, crlDays: intFlag(args, 'crl-days') })
      ctx.print(`wrote CRL number ${r.crlNumber} to ${ctx.dir}/crl.pem${out === undefined ? '' : ` and ${out}`}`)
    },
  },
  'plan-key': {
    usage: 'plan-key rotate',
    summary: 'new Ed25519 plan key; the previous public key stays published until the next rotation',
    details: 'Rewrites plan-keys.json (0600) and plan-jwks.json. Bundles issued later carry both public keys; give nodes\nthe new plan-jwks.json before the one after this rotation.',
    options: {},
    usesDir: true,
    run: async (args, ctx) => {
      expectPositionals('plan-key', args, 1, 1, 'the action "rotate"')
      if (args.positionals[0] !== 'rotate') throw new UsageError('unknown plan-key action; the only one is "rotate"')
      const r = await rotatePlanKey(ctx.dir)
      ctx.print(`new current plan key ${r.kid}`)
    },
  },
  'export-controller': {
    usage: 'export-controller <dir> [--force]',
    summary: 'the files a controller host needs, without the CA key',
    details: 'Writes exactly ca.pem, server.pem, server-key.pem (0600), crl.pem and plan-keys.json (0600) into <dir>\n(created with mode 0700 if missing). Needs a server certificate (run server-cert first). Refuses to overwrite\nexisting files unless --force.',
    options: { force: flag('overwrite the files if <dir> already holds them') },
    usesDir: true,
    run: async (args, ctx) => {
      expectPositionals('export-controller', args, 1, 1, 'a target directory')
      const written = await exportController(ctx.dir, args.positionals[0]!, { force: args.values.force === true })
      ctx.print(`wrote ${written.join(', ')}`)
    },
  },
  signer: SIGNER_COMMAND,
  'audit-verify': {
    usage: 'audit-verify <file>',
    summary: "check the audit log's hash chain; names the first broken line",
    details: 'Reads the controller audit log (one JSON line per event, each with seq and prev = SHA-256 of the previous\nline) and checks the whole chain. Exit 0 when intact; otherwise names the first broken line (1-based) and\nexits 1. Only reads; needs no PKI directory.',
    options: {},
    usesDir: false,
    run: async (args, ctx) => {
      expectPositionals('audit-verify', args, 1, 1, 'the audit log file')
      const file = args.positionals[0]!
      const result = await verifyAuditFile(file).catch((err: NodeJS.ErrnoException) => {
        throw new PkiError(`cannot read audit log ${file} (${err.code ?? 'error'})`)
      })
      if (!result.ok) throw new PkiError(`audit log ${file} is broken at line ${result.line}: ${result.reason}`)
      ctx.print(`ok: ${result.lines} lines, chain intact`)
    },
  },
}

/** Every command group (`pxe-pki token create`), by its name on the command line. */
export const GROUPS: Readonly<Record<string, CommandGroup>> = {
  token: TOKEN_GROUP,
  enroll: ENROLL_GROUP,
}
