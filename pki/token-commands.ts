/** `pxe-pki token create | list | revoke`: bootstrap tokens for device enrollment, kept with the PKI. */
import { expectPositionals, stringFlag } from './args.js'
import type { CommandGroup } from './commands.js'
import { UsageError } from './errors.js'
import { intFlag } from './issue-command.js'
import { printable } from './serial.js'
import {
  APPROVE_MODES, createToken, DEFAULT_ENROLL_CERT_DAYS, DEFAULT_TOKEN_USES, listTokens, MAX_ENROLL_CERT_DAYS, parseDuration, REENROLL_MODES, revokeToken,
  type ApproveMode, type ReenrollMode, type TokenEntry,
} from './token-store.js'

function oneOf<T extends string>(value: string | undefined, allowed: readonly T[], flag: string): T | undefined {
  if (value === undefined) return undefined
  if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`invalid ${flag} "${printable(value)}": use ${allowed.join(' or ')}`)
  return value as T
}

function lifetime(entry: TokenEntry): string {
  const s = entry.cert_seconds
  if (s === undefined) return `${entry.cert_days}d`
  return s % 3600 === 0 ? `${s / 3600}h` : s % 60 === 0 ? `${s / 60}m` : `${s}s`
}

/** What a token allows, in one sentence (stderr of `create`, and the table's columns). */
export function describeToken(e: TokenEntry): string {
  const approval = e.approve === 'auto' ? 'issued by the signer at once' : 'held until "pxe-pki enroll approve"'
  const reenroll = e.reenroll === 'allow' ? 'a name that holds a certificate may enroll again (the old one is revoked)' : 'enrolling a name that holds a certificate again waits for approval'
  return `token ${e.id}: ${e.uses} enrollment(s) of names matching "${e.names}" until ${e.expires_at}; ${approval}; certificates live ${lifetime(e)}; ${reenroll}`
}

function tokenTable(tokens: readonly TokenEntry[]): string {
  const rows = tokens.map((e) => [e.id, e.status, `${e.uses_left}/${e.uses}`, e.expires_at, e.approve, lifetime(e), e.reenroll, e.names])
  const head = ['id', 'status', 'uses', 'expires_at', 'approve', 'cert', 'reenroll', 'names']
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  return [head, ...rows].map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n')
}

/** The `token` group. */
export const TOKEN_GROUP: CommandGroup = {
  summary: 'bootstrap tokens for device enrollment: create (printed once), list, revoke',
  details: [
    'A token lets diskless nodes enroll: a node makes its key in memory at boot, sends a CSR with a proof made with',
    'the token, and the signer ("pxe-pki signer") issues its certificate. Tokens live in <pki>/tokens.json (0600,',
    'like the CA key); the token is printed once, by "token create". A leaked token can enroll at most --uses names',
    'matching its --names pattern before its --ttl runs out, and "token revoke" ends it at once.',
  ].join('\n'),
  commands: {
    create: {
      usage: 'token create --names PATTERN [--uses N] [--ttl DURATION] [--approve auto|manual] [--cert-days D] [--cert-ttl DURATION] [--reenroll allow|manual] [--json]',
      summary: 'make a token; prints it once (stdout) and what it allows (stderr)',
      details: [
        'PATTERN is a name where * stands for any run of characters (rack7-*, *-edge, or one exact name): letters, digits, - _ . and *.',
        'The token ("pxe1.<id>.<secret>") is printed once on stdout and never again: put it in the boot configuration',
        'of the nodes it is for (a token file), not in this shell\'s history. Every token action is recorded in the',
        'index, without the secret. DURATION is a whole number and a unit: 90s, 30m, 12h, 7d.',
      ].join('\n'),
      options: {
        names: { type: 'string', value: 'PATTERN', help: 'the names this token may enroll, e.g. rack7-* (required)' },
        uses: { type: 'string', value: 'N', help: `how many certificates it may issue (default ${DEFAULT_TOKEN_USES})` },
        ttl: { type: 'string', value: 'DURATION', help: 'how long it may be used (default 24h, at most 365d)' },
        approve: { type: 'string', value: 'auto|manual', help: 'auto: the signer issues at once (default); manual: held for "pxe-pki enroll approve"' },
        'cert-days': { type: 'string', value: 'D', help: `lifetime of the certificates it enrolls, in days (default ${DEFAULT_ENROLL_CERT_DAYS}, at most ${MAX_ENROLL_CERT_DAYS})` },
        'cert-ttl': { type: 'string', value: 'DURATION', help: 'a lifetime instead of --cert-days, from 1m (short-lived identities), e.g. 6h' },
        reenroll: { type: 'string', value: 'allow|manual', help: 'a name that holds a valid certificate enrolling again: allow (the old one is revoked) or manual (default: held)' },
        json: { type: 'boolean', help: 'print {"token", ...the token\'s entry} as JSON on stdout instead of the bare token' },
      },
      usesDir: true,
      run: async (args, ctx) => {
        expectPositionals('token create', args, 0, 0, 'no argument')
        const names = stringFlag(args, 'names')
        if (names === undefined) throw new UsageError('missing --names PATTERN (e.g. --names "rack7-*")')
        if (stringFlag(args, 'cert-days') !== undefined && stringFlag(args, 'cert-ttl') !== undefined) throw new UsageError('give --cert-days or --cert-ttl, not both')
        const ttl = stringFlag(args, 'ttl')
        const certTtl = stringFlag(args, 'cert-ttl')
        const approve = oneOf<ApproveMode>(stringFlag(args, 'approve'), APPROVE_MODES, '--approve')
        const reenroll = oneOf<ReenrollMode>(stringFlag(args, 'reenroll'), REENROLL_MODES, '--reenroll')
        const uses = intFlag(args, 'uses')
        const certDays = intFlag(args, 'cert-days')
        const made = await createToken(ctx.dir, {
          names,
          ...(uses === undefined ? {} : { uses }),
          ...(ttl === undefined ? {} : { ttlMs: parseDuration(ttl, '--ttl') }),
          ...(approve === undefined ? {} : { approve }),
          ...(certDays === undefined ? {} : { certDays }),
          ...(certTtl === undefined ? {} : { certTtlMs: parseDuration(certTtl, '--cert-ttl', MAX_ENROLL_CERT_DAYS * 86_400_000) }),
          ...(reenroll === undefined ? {} : { reenroll }),
        })
        ctx.print(args.values.json === true ? JSON.stringify({ token: made.token, ...made.entry }, null, 2) : made.token)
        ctx.notice(describeToken(made.entry))
        ctx.notice('this is the only time the token is shown; pxe-pki keeps only what checks its proofs')
      },
    },
    list: {
      usage: 'token list [--json]',
      summary: 'every token with its status and uses left (never a secret; reads only)',
      details: 'Status: active, expired, revoked or used_up. --json prints an array of {id, names, uses, uses_left, created_at,\nexpires_at, approve, cert_days, cert_seconds?, reenroll, status, revoked_at?}.',
      options: { json: { type: 'boolean', help: 'print a JSON array instead of the table' } },
      usesDir: true,
      run: async (args, ctx) => {
        expectPositionals('token list', args, 0, 0, 'no argument')
        const tokens = await listTokens(ctx.dir)
        ctx.print(args.values.json === true ? JSON.stringify(tokens, null, 2) : tokens.length === 0 ? 'no tokens (make one with "pxe-pki token create --names PATTERN")' : tokenTable(tokens))
      },
    },
    revoke: {
      usage: 'token revoke ID',
      summary: 'end a token at once: nothing more is issued under it',
      details: 'Certificates already issued under it stay valid (revoke them by name or serial with "pxe-pki revoke").\nRequests made with it and still pending are denied by the signer\'s next pass.',
      options: {},
      usesDir: true,
      run: async (args, ctx) => {
        expectPositionals('token revoke', args, 1, 1, 'the token id (the middle part of pxe1.<id>.<secret>, or from "token list")')
        const entry = await revokeToken(ctx.dir, args.positionals[0]!)
        ctx.print(`revoked token ${entry.id} (${entry.uses - entry.uses_left} of ${entry.uses} uses spent)`)
      },
    },
  },
}
