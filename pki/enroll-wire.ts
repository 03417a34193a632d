/**
 * The signer's three endpoints as the CA host speaks them: pull the pending requests, answer one, push a
 * CRL. Every answer is checked with zod before it is used: a controller is not trusted to mint an
 * identity, and a wrong answer must not become a wrong certificate.
 */
import { z } from 'zod'
import type { ControllerLink } from './controller-link.js'
import { errorCode, errorText } from './controller-link.js'
import type { PulledRequest } from './enroll-judge.js'
import { PkiError } from './errors.js'

/** The controller hands out at most this many pending requests per pull, oldest first. */
export const CONTROLLER_PAGE = 500

const REQUEST_ID = /^[A-Za-z0-9_-]{22}$/

const pulledRequestSchema = z.strictObject({
  request_id: z.string().regex(REQUEST_ID),
  kind: z.enum(['enroll', 'renew']),
  name: z.string().min(1).max(64),
  csr: z.string().max(16 * 1024),
  token_id: z.string().max(64).nullable(),
  proof: z.string().max(128).nullable(),
  source: z.string().max(128),
  presenting_serial: z.string().max(64).nullable(),
  created_at: z.string().max(64),
})

const pullAnswerSchema = z.strictObject({ requests: z.array(pulledRequestSchema).max(10_000) })

/** True when `id` has the shape of a request id (22 characters of base64url). */
export function isRequestId(id: string): boolean {
  return REQUEST_ID.test(id)
}

/** The most pending requests a controller keeps (a pull never reads more). */
const MAX_PENDING = 10_000

/**
 * GET /v1/enroll/requests, page after page (`after` the last one read): every pending request, oldest
 * first, so that requests held for an operator never hide the newer ones behind a full page.
 */
export async function pullPending(link: ControllerLink): Promise<PulledRequest[]> {
  const all: PulledRequest[] = []
  let after: string | null = null
  for (;;) {
    const path: string = after === null ? `/v1/enroll/requests?limit=${CONTROLLER_PAGE}` : `/v1/enroll/requests?limit=${CONTROLLER_PAGE}&after=${after}`
    const answer = await link.request('GET', path)
    if (answer.status !== 200) throw new PkiError(`${answer.controller} refused to list the requests: ${errorText(answer)}`)
    const parsed = pullAnswerSchema.safeParse(answer.json)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw new PkiError(`${answer.controller} answered the pull with something else than a request list${issue === undefined ? '' : ` (at "${issue.path.join('.')}")`}`)
    }
    const page = parsed.data.requests
    all.push(...page)
    const last = page.at(-1)
    if (page.length < CONTROLLER_PAGE || last === undefined || all.length >= MAX_PENDING) return all
    after = last.request_id
  }
}

/** What the signer posts for one request. */
export type Decision = { readonly certificate: string } | { readonly denied: string }

/** How an answer was taken: delivered, already answered / gone (nothing more to do), or refused. */
export type Delivery =
  | { readonly kind: 'delivered' }
  | { readonly kind: 'settled'; readonly why: string }
  | { readonly kind: 'refused'; readonly why: string }

/** POST /v1/enroll/requests/:request_id; throws NoControllerError when no controller answered. */
export async function postDecision(link: ControllerLink, requestId: string, decision: Decision): Promise<Delivery> {
  const answer = await link.request('POST', `/v1/enroll/requests/${requestId}`, { contentType: 'application/json', data: JSON.stringify(decision) })
  if (answer.status === 200) return { kind: 'delivered' }
  if (answer.status === 409) return { kind: 'settled', why: 'already answered' }
  if (answer.status === 404 || answer.status === 410) return { kind: 'settled', why: errorCode(answer.json) === 'gone' ? 'past its time' : 'unknown to the controller' }
  return { kind: 'refused', why: errorText(answer) }
}

const crlAnswerSchema = z.object({ crl_number: z.string().nullable(), changed: z.boolean() })

/** POST /v1/crl: the CRL number in force and whether this push changed it, or the refusal. */
export async function pushCrl(link: ControllerLink, pem: string): Promise<{ ok: true; crlNumber: string | null; changed: boolean } | { ok: false; why: string }> {
  const answer = await link.request('POST', '/v1/crl', { contentType: 'application/pkix-crl', data: pem })
  if (answer.status !== 200) return { ok: false, why: errorText(answer) }
  const parsed = crlAnswerSchema.safeParse(answer.json)
  if (!parsed.success) return { ok: false, why: 'the controller answered the push with something else than a CRL summary' }
  return { ok: true, crlNumber: parsed.data.crl_number, changed: parsed.data.changed }
}
