/** Test helpers for POST /v1/crl: the push itself over mTLS, audit lines by event, polling with a deadline. */
import { readFileSync } from 'node:fs'
import { request, type Identity, type Reply } from '../e2e/harness.js'

/** POSTs `pem` to /v1/crl presenting `id` (application/pkix-crl unless `contentType` says otherwise). */
export function pushCrl(port: number, ca: string, id: Identity, pem: string | Buffer, contentType = 'application/pkix-crl'): Promise<Reply> {
  return request(port, ca, id, '/v1/crl', { method: 'POST', rawBody: pem, contentType })
}

/** The audit lines of one event kind in the log at `path`, parsed. */
export function auditLinesOf(path: string, event: string): Record<string, any>[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, any>)
    .filter((e) => e.event === event)
}

/** Polls `check` every 50 ms until it holds; the elapsed ms, or -1 once `ms` passed. */
export async function within(ms: number, check: () => Promise<boolean> | boolean): Promise<number> {
  const start = Date.now()
  while (Date.now() - start < ms) {
    if (await check()) return Date.now() - start
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return -1
}
