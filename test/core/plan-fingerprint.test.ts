import t from 'tap'
import { PlanFingerprinter, planFingerprint, planFingerprintInOrder } from '../../src/core/plan-fingerprint.js'

t.test('the three ways to fingerprint a plan give the same hash', async (t) => {
  const order = ['node-a', 'node-b', 'x']
  const starts = Int32Array.from([0, 5, 9])
  const counts = Int32Array.from([5, 4, 0])
  const fromMap = planFingerprint(order.map((id, i) => [id, { rangeStart: starts[i]!, rangeCount: counts[i]! }] as const))
  t.match(fromMap, /^[0-9a-f]{64}$/)
  t.equal(planFingerprintInOrder(order, starts, counts), fromMap)
  const fingerprinter = new PlanFingerprinter()
  t.equal(fingerprinter.fingerprint(order, starts, counts), fromMap)
  // The same order again with other ranges (only the numbers are rewritten): still the reference hash.
  const moved = { starts: Int32Array.from([0, 4, 65_535]), counts: Int32Array.from([4, 5, 1]) }
  t.equal(fingerprinter.fingerprint(order, moved.starts, moved.counts), planFingerprintInOrder(order, moved.starts, moved.counts))
  t.not(fingerprinter.fingerprint(order, moved.starts, moved.counts), fromMap)
  // Another order (a join): laid out again.
  const joined = ['node-a', 'node-aa', 'node-b', 'x']
  const four = { starts: Int32Array.from([0, 3, 6, 9]), counts: Int32Array.from([3, 3, 3, 0]) }
  t.equal(fingerprinter.fingerprint(joined, four.starts, four.counts), planFingerprintInOrder(joined, four.starts, four.counts))
  t.equal(planFingerprint([]), planFingerprintInOrder([], [], []))
})
