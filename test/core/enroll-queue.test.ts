// The enrollment queue's own rules (SPEC "Device enrollment and renewal"): the same CSR is the same request,
// floods from one address or one token leave room for others, requests go at their time, answers are kept
// 10 minutes, and what changed is handed to the store.
import t from 'tap'
import { AppError } from '../../src/errors.js'
import { EnrollQueue, type EnrollSubmission } from '../../src/core/enroll-queue.js'

let seq = 0
const newId = () => `req-${++seq}`
const HOUR = 3_600_000
const MIN = 60_000

function enrollment(n: number, over: Partial<EnrollSubmission> = {}): EnrollSubmission {
  return { kind: 'enroll', name: `node-${n}`, csr: `csr ${n}`, fingerprint: `fp-${n}`, tokenId: 'aaaaaaaaaa', proof: 'p'.repeat(43), source: `10.0.0.${n % 250}`, presentingSerial: null, ...over }
}

function refusal(fn: () => unknown): AppError {
  try {
    fn()
  } catch (err) {
    if (err instanceof AppError) return err
    throw err
  }
  throw new Error('expected a refusal')
}

t.test('the same CSR again is the same request; a new CSR is a new one', async (t) => {
  const q = new EnrollQueue()
  const a = q.submit(0, enrollment(1), newId)
  const again = q.submit(1000, enrollment(1), newId)
  t.ok(a.created)
  t.notOk(again.created)
  t.equal(again.request.id, a.request.id)
  t.equal(q.pending, 1)
  t.equal(q.submit(0, enrollment(2), newId).request.id === a.request.id, false)
  t.equal(q.pending, 2)
})

t.test('limits: the queue, one address, one token; a refusal changes nothing and others are still served', async (t) => {
  const q = new EnrollQueue({ maxPending: 20, perSourcePending: 3, perTokenPending: 10, pendingMs: HOUR, decidedMs: 10 * MIN })
  for (let i = 0; i < 3; i++) q.submit(0, enrollment(i, { source: '10.9.9.9', tokenId: 'bbbbbbbbbb' }), newId)
  q.takeChanges()
  const bySource = refusal(() => q.submit(0, enrollment(99, { source: '10.9.9.9', tokenId: 'bbbbbbbbbb' }), newId))
  t.equal(bySource.code, 'rate_limited')
  t.equal(bySource.statusCode, 429)
  t.ok(Number(bySource.headers['retry-after']) > 0)
  t.equal(q.pending, 3)
  t.notOk(q.dirty, 'a refusal changed nothing')
  for (let i = 10; i < 17; i++) q.submit(0, enrollment(i, { tokenId: 'bbbbbbbbbb' }), newId)
  t.equal(refusal(() => q.submit(0, enrollment(50, { tokenId: 'bbbbbbbbbb' }), newId)).code, 'rate_limited', 'the token is full')
  t.ok(q.submit(0, enrollment(51, { tokenId: 'cccccccccc' }), newId).created, 'another token is served')
  for (let i = 60; i < 69; i++) q.submit(0, enrollment(i, { tokenId: 'dddddddddd' }), newId)
  t.equal(q.pending, 20)
  t.match(refusal(() => q.submit(0, enrollment(70, { tokenId: 'eeeeeeeeee' }), newId)).message, /queue is full/)
  // an answer frees a place
  q.decide(0, q.listPending(0, 1)[0]!.id, { denied: 'bad proof', by: 'signer-1' })
  t.ok(q.submit(0, enrollment(70, { tokenId: 'eeeeeeeeee' }), newId).created)
})

t.test('times: pending 1 hour, answered 10 minutes; then 410 gone, and 404 for an id never given', async (t) => {
  const q = new EnrollQueue()
  const a = q.submit(0, enrollment(1), newId).request
  const b = q.submit(30 * MIN, enrollment(2), newId).request
  q.decide(31 * MIN, b.id, { certificate: 'PEM', by: 'signer-1', rule: 'token_auto' })
  t.equal(q.get(41 * MIN, b.id).certificate, 'PEM')
  t.equal(refusal(() => q.get(41 * MIN + 1, b.id)).code, 'gone')
  t.equal(q.get(HOUR, a.id).status, 'pending')
  t.equal(refusal(() => q.get(HOUR + 1, a.id)).code, 'gone')
  t.equal(refusal(() => q.get(HOUR + 1, a.id)).statusCode, 410)
  t.equal(refusal(() => q.get(0, 'never')).code, 'not_found')
  t.equal(q.pending, 0)
  t.same([...q.takeChanges().deleted].sort(), [a.id, b.id].sort())
})

t.test('a renewal replaces the pending renewal of the same name', async (t) => {
  const q = new EnrollQueue()
  const renew = (n: number) => ({ kind: 'renew' as const, name: 'node-a', csr: `r${n}`, fingerprint: `rfp-${n}`, tokenId: null, proof: null, source: '10.0.0.1', presentingSerial: 'ab' })
  const first = q.submit(0, renew(1), newId).request
  const second = q.submit(10, renew(2), newId).request
  t.not(second.id, first.id)
  t.equal(q.pending, 1)
  t.equal(refusal(() => q.get(20, first.id)).code, 'not_found', 'replaced, not expired')
  t.same(q.listPending(20, 10).map((r) => r.id), [second.id])
})

t.test('a decision is taken once; the signer list is oldest first and bounded', async (t) => {
  const q = new EnrollQueue()
  const ids = [1, 2, 3, 4].map((n) => q.submit(n, enrollment(n), newId).request.id)
  t.same(q.listPending(10, 2).map((r) => r.id), ids.slice(0, 2))
  q.decide(10, ids[0]!, { certificate: 'PEM', by: 's', rule: 'token_auto' })
  t.equal(refusal(() => q.decide(11, ids[0]!, { denied: 'x', by: 's' })).code, 'identity_conflict')
  t.same(q.listPending(12, 10).map((r) => r.id), ids.slice(1))
})

t.test('pages: after a request, the ones that came later (held ones never hide newer ones)', async (t) => {
  const q = new EnrollQueue()
  const ids = [1, 2, 3, 4, 5].map((n) => q.submit(n, enrollment(n), newId).request.id)
  t.same(q.listPending(10, 2).map((r) => r.id), ids.slice(0, 2))
  t.same(q.listPending(10, 2, ids[1]).map((r) => r.id), ids.slice(2, 4))
  t.same(q.listPending(10, 2, ids[3]).map((r) => r.id), ids.slice(4))
  t.same(q.listPending(10, 10, 'unknown').map((r) => r.id), ids, 'an unknown cursor starts over')
})

t.test('restore: what a store kept comes back, past-time requests do not, and nothing is dirty', async (t) => {
  const q = new EnrollQueue()
  const a = q.submit(0, enrollment(1), newId).request
  const b = q.submit(5 * MIN, enrollment(2), newId).request
  q.decide(6 * MIN, b.id, { certificate: 'PEM', by: 's', rule: 'token_auto' })
  const kept = q.takeChanges().put.map((r) => ({ ...r }))
  const r = new EnrollQueue()
  r.restore(kept, 10 * MIN)
  t.equal(r.pending, 1)
  t.equal(r.get(10 * MIN, b.id).status, 'issued')
  t.notOk(r.dirty)
  t.equal(r.submit(11 * MIN, enrollment(1), newId).request.id, a.id, 'the same CSR finds its restored request')
  const late = new EnrollQueue()
  late.restore(kept, 2 * HOUR)
  t.equal(late.size, 0)
})

t.test('request ids never start with "-" or "_" (they are typed on command lines)', async (t) => {
  const { newRequestId } = await import('../../src/service/enroll-service.js')
  for (let i = 0; i < 2000; i++) {
    const id = newRequestId()
    if (!/^[A-Za-z0-9][A-Za-z0-9_-]{21}$/.test(id)) t.fail(`bad id ${id}`)
  }
  t.pass('2000 ids start with a letter or a digit')
})
