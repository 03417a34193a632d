// Pure parts of the fleet benchmark: the profile summary's windows and categories, the source addresses.
import t from 'tap'
import { sourceAddress } from '../../bench/fleet/scale/fleet-bench.js'
import { summarizeProfile } from '../../bench/fleet/scale/profile-summary.js'
import { takeFrame } from '../../bench/http-frames.js'

t.test('a profile is summarized by self time within a window, by category and by function', async (t) => {
  const frame = (id: number, functionName: string, url: string) => ({ id, callFrame: { functionName, url, lineNumber: 9, scriptId: '1', columnNumber: 0 } })
  const profile = {
    nodes: [frame(1, '(idle)', ''), frame(2, 'writeState', 'file:///x/dist/src/state/journaled-file-store.js'), frame(3, '(garbage collector)', ''), frame(4, 'sign', 'file:///x/node_modules/jose/dist/webapi/lib/jws_sign.js')],
    startTime: 1_000_000, // µs: 1000 ms on the shared clock
    endTime: 1_100_000,
    // Samples every 10 ms: state, state, gc, jose, idle, state (the last has no duration after it).
    samples: [2, 2, 3, 4, 1, 2],
    timeDeltas: [0, 10_000, 10_000, 10_000, 10_000, 10_000],
  }
  const all = summarizeProfile(profile, null, null)
  t.equal(all.totalMs, 50)
  t.same(Object.fromEntries(all.byCategory), { 'state writes': 20, 'garbage collection': 10, 'plan signing (jose)': 10, idle: 10 })
  t.same(all.topFunctions[0], ['writeState src/state/journaled-file-store.js:10', 20])
  const window = summarizeProfile(profile, 1015, 1035)
  t.same(Object.fromEntries(window.byCategory), { 'garbage collection': 10, 'plan signing (jose)': 10 }, 'only the samples at 1020 and 1030 ms')
  t.throws(() => summarizeProfile({ nodes: 'nope' }, null, null), 'not a profile')
})

t.test('50 nodes per loopback source address, under the controller default cap of 64', async (t) => {
  t.equal(sourceAddress(0), '127.1.0.1')
  t.equal(sourceAddress(49), '127.1.0.1')
  t.equal(sourceAddress(50), '127.1.0.2')
  t.equal(sourceAddress(9999), '127.1.0.200')
  t.equal(sourceAddress(50 * 250), '127.1.1.1')
  const counts = new Map<string, number>()
  for (let i = 0; i < 10_000; i++) counts.set(sourceAddress(i), (counts.get(sourceAddress(i)) ?? 0) + 1)
  t.equal(Math.max(...counts.values()), 50)
})

t.test('the load generators read one answer at a time off the raw socket bytes', async (t) => {
  const answer = (body: string) => `HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
  const two = Buffer.from(answer('{"a":1}') + answer('{}'), 'latin1')
  const first = takeFrame(two)
  if (first === null || first instanceof Error) throw new Error('a complete answer was not read')
  t.equal(first.status, 429)
  t.equal(first.body.toString(), '{"a":1}')
  const second = takeFrame(first.rest)
  t.match(second, { status: 429 }, 'the bytes after the first answer start the next')
  t.equal(takeFrame(two.subarray(0, 20)), null, 'an incomplete head waits for more bytes')
  t.equal(takeFrame(two.subarray(0, first.body.byteOffset - two.byteOffset + 3)), null, 'an incomplete body waits too')
  const bad = takeFrame(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', 'latin1'))
  t.match(bad, Error, 'an answer without Content-Length is an error')
})
