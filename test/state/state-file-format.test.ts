import t from 'tap'
import { decodeStateFile, encodeStateFile } from '../../src/state/state-file-format.js'

const bytes = (s: string): Uint8Array => Buffer.from(s, 'utf8')

t.test('the file is one JSON object whose checksum covers the exact body text', async (t) => {
  const text = encodeStateFile({ b: 1, a: [true, null, 'ü'] })
  t.ok(text.endsWith('}\n'))
  const whole = JSON.parse(text) as Record<string, unknown>
  t.same(Object.keys(whole), ['format', 'version', 'sha256', 'body'])
  t.match(whole, { format: 'pxe-controller-state', version: 1, sha256: /^[0-9a-f]{64}$/ })
  t.same(decodeStateFile(bytes(text)), { body: { b: 1, a: [true, null, 'ü'] } })
  t.throws(() => encodeStateFile(undefined), TypeError)
})

t.test('damage is named', async (t) => {
  const good = encodeStateFile({ generation: 12, nodes: ['x'] })
  const cases: Array<[string, Uint8Array, RegExp]> = [
    ['empty', bytes(''), /empty/],
    ['truncated mid-body', bytes(good.slice(0, good.length - 9)), /not valid JSON|truncated/],
    ['missing final newline', bytes(good.slice(0, -1)), /truncated/],
    ['digit changed', bytes(good.replace('12', '13')), /checksum mismatch/],
    ['other format', bytes('{"format":"something-else","body":{}}\n'), /not a pxe-controller-state file \(format: "something-else"\)/],
    ['no format', bytes('[1,2]\n'), /format: missing/],
    ['newer version', bytes(good.replace('"version":1', '"version":2')), /unsupported format version 2/],
    ['header reordered', bytes(`{"version":1,"format":"pxe-controller-state"}\n`), /header is not in the expected form/],
    ['invalid UTF-8', Buffer.concat([bytes(good.slice(0, 100)), Buffer.from([0xff]), bytes(good.slice(101))]), /UTF-8/],
  ]
  for (const [name, input, problem] of cases) t.match(decodeStateFile(input), { problem }, name)
})
