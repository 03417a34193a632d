/**
 * `pxe-pki enroll list | approve | deny`: manual approval on the CA host. `list` pulls the pending requests
 * and shows what the signer would do with each (the same judgement, nothing signed); `approve` issues a held
 * request and posts it at once; `deny` posts a denial. They speak to the controllers with the signer bundle.
 */
import { expectPositionals, stringFlag } from './args.js'
import type { ParsedArgs } from './args.js'
import type { Command, CommandGroup } from './commands.js'
import type { ControllerLink } from './controller-link.js'
import { signPass } from './enroll-issue.js'
import { judge, type PulledRequest, type Verdict } from './enroll-judge.js'
import { CONTROLLER_PAGE, isRequestId, postDecision, pullPending, pushCrl } from './enroll-wire.js'
import { PkiError, UsageError } from './errors.js'
import type { HandlerContext } from './issue-command.js'
import { readPki } from './pki-dir.js'
import { printable } from './serial.js'
import { LINK_FLAGS, openLink } from './signer-command.js'
import { readTokenFile } from './token-store.js'

/** One line of `enroll list --json`: never a CSR or a proof. */
export interface PreviewEntry {
  readonly request_id: string
  readonly kind: PulledRequest['kind']
  readonly name: string
  readonly token_id: string | null
  readonly source: string
  readonly created_at: string
  readonly action: 'issue' | 'deny' | 'held'
  /** issue: the rule (token_auto, renewal); deny: the reason; held: why. */
  readonly detail: string
}

function detailOf(v: Verdict): string {
  return v.kind === 'issue' ? v.rule : v.kind === 'deny' ? v.reason : v.why
}

/** What the signer would do with each of `requests` now (reads the PKI only). */
async function preview(dir: string, requests: readonly PulledRequest[], now = new Date()): Promise<PreviewEntry[]> {
  const index = await readPki(dir)
  const tokens = new Map((await readTokenFile(dir)).tokens.map((t) => [t.id, t]))
  return requests.map((r) => {
    const v = judge(r, { index, tokens, now, approving: false })
    const { request_id, kind, name, token_id, source, created_at } = r
    return { request_id, kind, name, token_id, source, created_at, action: v.kind === 'hold' ? 'held' : v.kind, detail: detailOf(v) }
  })
}

function previewTable(entries: readonly PreviewEntry[]): string {
  if (entries.length === 0) return 'no pending requests'
  const rows = entries.map((e) => [e.request_id, e.kind, printable(e.name), e.token_id ?? '-', e.created_at, e.action === 'held' ? 'HELD' : e.action, printable(e.detail)])
  const head = ['request_id', 'kind', 'name', 'token', 'created_at', 'signer', 'why']
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  return [head, ...rows].map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n')
}

const NOT_PENDING = 'already answered, past its time, further than the oldest pending requests, or never made; "pxe-pki enroll list" shows the pending ones'

/** The pending request `id`, or a PkiError that says it is not pending. */
async function findPending(link: ControllerLink, id: string): Promise<PulledRequest> {
  const found = (await pullPending(link)).find((r) => r.request_id === id)
  if (found === undefined) throw new PkiError(`no pending request ${id} on the controllers (${NOT_PENDING})`)
  return found
}

function requestIdArg(command: string, args: ParsedArgs): string {
  expectPositionals(command, args, 1, 1, 'a REQUEST_ID (from "pxe-pki enroll list")')
  const id = args.positionals[0]!
  if (!isRequestId(id)) throw new UsageError(`invalid request id "${printable(id)}": 22 characters of base64url, as "pxe-pki enroll list" shows them`)
  return id
}

async function withLink(command: string, args: ParsedArgs, ctx: HandlerContext, fn: (link: ControllerLink) => Promise<void>): Promise<void> {
  const { link } = await openLink(command, args, ctx.dir)
  try {
    await fn(link)
  } finally {
    link.close()
  }
}

const list: Command = {
  usage: 'enroll list --controller URL[,URL] --bundle DIR [--json]',
  summary: 'the pending enrollments and renewals, and what the signer would do with each',
  details: [
    `Pulls the pending requests (the oldest ${CONTROLLER_PAGE}) with the signer bundle and judges each one against this PKI as the`,
    'signer does, without signing anything: issue (with the rule), deny (with the reason) or HELD (with why: a',
    'manual token, or a re-enrollment under --reenroll manual). Approve or deny a held one by its request id.',
    '--json prints an array of {request_id, kind, name, token_id, source, created_at, action, detail}; never a CSR or a proof.',
  ].join('\n'),
  options: { ...LINK_FLAGS, json: { type: 'boolean', help: 'print a JSON array instead of the table' } },
  usesDir: true,
  run: (args, ctx) => withLink('enroll list', args, ctx, async (link) => {
    expectPositionals('enroll list', args, 0, 0, 'no argument')
    const entries = await preview(ctx.dir, await pullPending(link))
    ctx.print(args.values.json === true ? JSON.stringify(entries, null, 2) : previewTable(entries))
  }),
}

const approve: Command = {
  usage: 'enroll approve REQUEST_ID --controller URL[,URL] --bundle DIR',
  summary: 'issue a held request now and post its certificate',
  details: [
    'Every check of the signer still applies (token, pattern, proof, CSR); only the manual approval is given. A',
    're-enrollment revokes the certificates of the name it supersedes and the new CRL is pushed at once. The index',
    'records the approval; the controllers audit the issue with this signer\'s name.',
  ].join('\n'),
  options: { ...LINK_FLAGS },
  usesDir: true,
  run: (args, ctx) => {
    const id = requestIdArg('enroll approve', args)
    return withLink('enroll approve', args, ctx, async (link) => {
      const request = await findPending(link, id)
      const { outcomes, crl } = await signPass(ctx.dir, [request], { approving: true })
      const outcome = outcomes[0]!
      if (!('issued' in outcome)) throw new PkiError(`request ${id} (${printable(request.name)}) cannot be approved: ${'denied' in outcome ? outcome.denied : outcome.held}; the signer denies it on its next pass`)
      const { serial, supersedes } = outcome.issued
      let delivery
      try {
        delivery = await postDecision(link, id, { certificate: outcome.issued.certificate })
      } catch (err) {
        throw new PkiError(`certificate ${serial} for ${request.name} is in the index but was not delivered (${(err as Error).message}); the node will ask again`)
      }
      if (delivery.kind !== 'delivered') throw new PkiError(`certificate ${serial} for ${request.name} is in the index but the controller did not take it: the request is ${delivery.why}`)
      ctx.print(`issued ${serial} to ${request.name} (request ${id})${supersedes.length > 0 ? `; revoked ${supersedes.join(', ')} (superseded)` : ''}`)
      if (crl !== null) {
        const pushed = await pushCrl(link, crl).catch((err: Error) => ({ ok: false as const, why: err.message }))
        if (!pushed.ok) throw new PkiError(`the new CRL was not pushed (${pushed.why}); "pxe-pki signer" pushes it on its next pass`)
        ctx.notice(`pushed CRL ${pushed.crlNumber ?? '?'}`)
      }
    })
  },
}

const DEFAULT_DENY_REASON = 'denied by the operator'

const deny: Command = {
  usage: 'enroll deny REQUEST_ID --controller URL[,URL] --bundle DIR [--reason R]',
  summary: 'deny a pending request; the node is told the reason',
  details: 'Posts the denial with the signer bundle; the node polling it gets {"status": "denied", "reason"}. Nothing in\nthe PKI changes and no token use is spent.',
  options: { ...LINK_FLAGS, reason: { type: 'string', value: 'R', help: `the reason the node is told (default "${DEFAULT_DENY_REASON}", at most 256 characters)` } },
  usesDir: true,
  run: (args, ctx) => {
    const id = requestIdArg('enroll deny', args)
    const reason = stringFlag(args, 'reason') ?? DEFAULT_DENY_REASON
    if (reason.trim() === '' || reason.length > 256 || !/^[\x20-\x7e]+$/.test(reason)) throw new UsageError('invalid --reason: 1 to 256 printable characters')
    return withLink('enroll deny', args, ctx, async (link) => {
      const delivery = await postDecision(link, id, { denied: reason })
      if (delivery.kind === 'settled') throw new PkiError(`request ${id} is ${delivery.why} (${NOT_PENDING})`)
      if (delivery.kind === 'refused') throw new PkiError(`the controller refused the denial of ${id}: ${delivery.why}`)
      ctx.print(`denied request ${id}: ${reason}`)
    })
  },
}

/** The `enroll` group. */
export const ENROLL_GROUP: CommandGroup = {
  summary: 'manual approval of enrollments on the CA host: list, approve, deny',
  details: 'Requests held by the signer (manual tokens, re-enrollments under --reenroll manual) wait here for an operator.\nEach subcommand connects to the controllers with the signer bundle, as "pxe-pki signer" does.',
  commands: { list, approve, deny },
}
