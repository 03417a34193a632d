/**
 * `pxe-pki signer`: the enrollment signer on the CA host. It connects out to the controllers (it listens
 * on nothing), and every --interval seconds runs one pass (signer-round.ts), printing one line on stderr
 * when a pass did something and nothing when idle. SIGTERM or SIGINT lets the pass in progress finish,
 * then it exits 0. --once runs one pass, for a CA host that is connected now and then.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { listFlag, expectPositionals, stringFlag } from './args.js'
import type { ParsedArgs } from './args.js'
import type { Command } from './commands.js'
import { ControllerLink, parseControllerUrls } from './controller-link.js'
import { DEFAULT_CRL_DAYS } from './crl.js'
import { PkiError, UsageError } from './errors.js'
import type { HandlerContext } from './issue-command.js'
import { intFlag } from './issue-command.js'
import { loadSignerBundle } from './signer-bundle.js'
import { SignerRounds, type RoundReport } from './signer-round.js'
import { checkDays } from './validate.js'

const DEFAULT_INTERVAL_S = 2
const MAX_INTERVAL_S = 86_400
/** The same problem again is repeated at most this often while it lasts. */
const REPEAT_PROBLEM_MS = 60_000

/** The controllers, the signer bundle and the link over them, from the flags shared by `signer` and `enroll`. */
export async function openLink(command: string, args: ParsedArgs, dir: string): Promise<{ link: ControllerLink; controllers: string[]; bundleDir: string; signerName: string }> {
  const controllers = parseControllerUrls(listFlag(args, 'controller'))
  const bundleDir = stringFlag(args, 'bundle')
  if (bundleDir === undefined || bundleDir === '') throw new UsageError(`"${command}" needs --bundle DIR: a signer bundle (pxe-pki issue NAME --role signer)`)
  const bundle = await loadSignerBundle(bundleDir, dir)
  return { link: new ControllerLink(controllers, bundle), controllers, bundleDir, signerName: bundle.name }
}

/** The one progress line of a pass that did something, or null when it did nothing. */
export function progressLine(r: RoundReport): string | null {
  if (r.issued + r.denied === 0 && r.newlyHeld.length === 0 && r.crlPushed === null && !r.crlRefreshed) return null
  const crl = r.crlRefreshed ? `; CRL re-signed (half of its validity was gone)${r.crlPushed === null ? '' : ` and CRL ${r.crlPushed} pushed`}` : r.crlPushed === null ? '' : `; CRL ${r.crlPushed} pushed`
  return `signer: issued ${r.issued}, denied ${r.denied}, held ${r.held}${crl}`
}

function printReport(r: RoundReport, notice: (line: string) => void, problemsToo: boolean): void {
  const line = progressLine(r)
  if (line !== null) notice(line)
  for (const note of r.notes) notice(`signer: ${note}`)
  for (const h of r.newlyHeld) notice(`signer: held ${h.request_id} (${h.kind} ${h.name}): ${h.why}; see "pxe-pki enroll list", then enroll approve or deny`)
  if (problemsToo) for (const p of r.problems) notice(`signer: ${p}`)
}

async function runSigner(args: ParsedArgs, ctx: HandlerContext): Promise<void> {
  expectPositionals('signer', args, 0, 0, 'no argument')
  const once = args.values.once === true
  const intervalS = intFlag(args, 'interval') ?? DEFAULT_INTERVAL_S
  if (intervalS < 1 || intervalS > MAX_INTERVAL_S) throw new UsageError(`invalid --interval ${intervalS}: from 1 to ${MAX_INTERVAL_S} seconds`)
  if (once && stringFlag(args, 'interval') !== undefined) throw new UsageError('--interval means nothing with --once')
  const crlDays = checkDays(intFlag(args, 'crl-days') ?? DEFAULT_CRL_DAYS, '--crl-days')
  const { link, controllers, signerName } = await openLink('signer', args, ctx.dir)
  const rounds = new SignerRounds({ dir: ctx.dir, link, crlDays })
  try {
    if (once) {
      const report = await rounds.pass()
      printReport(report, ctx.notice, true)
      if (report.problems.length > 0) throw new PkiError(`signer --once: ${report.reached ? `${report.problems.length} problem(s), above` : 'no controller could be reached'}`)
      return
    }
    await loop(rounds, intervalS, ctx, `signer ${signerName}: signing with ${ctx.dir} for ${controllers.join(', ')}, a pass every ${intervalS} s`)
  } finally {
    link.close()
  }
}

/** Passes until SIGTERM or SIGINT; the pass in progress always finishes. */
async function loop(rounds: SignerRounds, intervalS: number, ctx: HandlerContext, banner: string): Promise<void> {
  const stop = new AbortController()
  const onSignal = () => stop.abort()
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  ctx.notice(banner)
  let lastProblems = ''
  let lastProblemsAt = 0
  try {
    while (!stop.signal.aborted) {
      const report = await rounds.pass()
      const problems = report.problems.join('\n')
      const repeat = problems !== lastProblems || Date.now() - lastProblemsAt >= REPEAT_PROBLEM_MS
      printReport(report, ctx.notice, problems !== '' && repeat)
      if (problems === '' && lastProblems !== '') ctx.notice('signer: the controllers answer again')
      if (problems !== '' && repeat) lastProblemsAt = Date.now()
      lastProblems = problems
      await sleep(intervalS * 1000, undefined, { signal: stop.signal }).catch(() => undefined)
    }
  } finally {
    process.off('SIGTERM', onSignal)
    process.off('SIGINT', onSignal)
  }
  ctx.notice('signer: stopped')
}

const CONTROLLER_FLAG = { type: 'string', multiple: true, value: 'URL[,URL]', help: 'the controllers, tried in order (HA: every member; a follower answers 503 and the next is tried)' } as const
const BUNDLE_FLAG = { type: 'string', value: 'DIR', help: 'the signer bundle folder (pxe-pki issue NAME --role signer): key.pem, cert.pem, ca.pem' } as const

/** Flags of every command that talks to the controllers. */
export const LINK_FLAGS = { controller: CONTROLLER_FLAG, bundle: BUNDLE_FLAG } as const

/** The `signer` command. */
export const SIGNER_COMMAND: Command = {
  usage: 'signer --controller URL[,URL] --bundle DIR [--once] [--interval S] [--crl-days N]',
  summary: 'sign enrollments and renewals the controllers queued, and keep their CRL fresh (runs on the CA host)',
  details: [
    'Connects out to the controllers with a signer bundle (it listens on nothing) and, every --interval seconds,',
    'pulls the pending requests, checks each one again here (token known, unrevoked, unexpired, a use left; the',
    "name inside the token's pattern; the proof under the token's secret over this CSR; the CSR's signature and",
    'key; a renewal: the presenting certificate valid, unrevoked and the newest of its name), signs what the policy',
    'approves (auto tokens, renewals) with role node, posts each certificate or denial, and leaves manual ones',
    'pending for "pxe-pki enroll approve" (listed once on stderr). A re-enrollment follows the token\'s --reenroll',
    'and revokes the certificates it supersedes; the new CRL is pushed at once. The CRL is also re-signed and pushed',
    'when less than half of its validity is left, and crl.pem is pushed whenever it changed on this host (e.g. after',
    '"pxe-pki revoke"). One line per pass that did something on stderr; nothing when idle. SIGTERM or SIGINT: the',
    'pass in progress finishes, then exit 0. --once: one pass, exit 0, or 1 when a controller could not be reached',
    'or an answer could not be delivered (it is posted again by the next pass of this process only).',
  ].join('\n'),
  options: {
    ...LINK_FLAGS,
    once: { type: 'boolean', help: 'run one pass and exit (a CA host that is connected now and then)' },
    interval: { type: 'string', value: 'S', help: `seconds between passes (default ${DEFAULT_INTERVAL_S}); not with --once` },
    'crl-days': { type: 'string', value: 'N', help: `validity of the CRLs the signer writes, in days: their nextUpdate (default ${DEFAULT_CRL_DAYS})` },
  },
  usesDir: true,
  run: runSigner,
}
