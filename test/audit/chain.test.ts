import t from 'tap'
import { GENESIS_HASH, hashLine, verifyAuditText } from '../../src/audit/chain.js'

/** A chain built by hand from the format's definition, independent of AuditLog. */
function chainLines(n: number): string[] {
  const lines: string[] = []
  let prev = GENESIS_HASH
  for (let seq = 1; seq <= n; seq++) {
    const line = JSON.stringify({ level: 30, seq, prev, event: 'drain_set', node: `node-${seq}` })
    lines.push(line)
    prev = hashLine(line)
  }
  return lines
}
const text = (lines: readonly string[]): string => lines.map((l) => `${l}\n`).join('')

t.test('hashLine is the hex SHA-256 of the exact text', async (t) => {
  t.equal(GENESIS_HASH, '0'.repeat(64))
  t.equal(hashLine(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')
  t.not(hashLine('{"a":1}'), hashLine('{"a":1} '))
})

t.test('an intact chain verifies and reports its head', async (t) => {
  const lines = chainLines(6)
  t.same(verifyAuditText(text(lines)), { ok: true, lines: 6, lastHash: hashLine(lines[5]!) })
  t.same(verifyAuditText(''), { ok: true, lines: 0, lastHash: GENESIS_HASH })
})

t.test('names the first broken line', async (t) => {
  const base = chainLines(6)
  const edit = (i: number, f: (o: Record<string, unknown>) => void): string[] => {
    const copy = [...base]
    const o = JSON.parse(copy[i]!) as Record<string, unknown>
    f(o)
    copy[i] = JSON.stringify(o)
    return copy
  }
  const cases: Array<[string, string, number, RegExp]> = [
    ['deleted first line', text(base.slice(1)), 1, /seq is 2, expected 1/],
    ['deleted line 3', text([...base.slice(0, 2), ...base.slice(3)]), 3, /seq is 4, expected 3/],
    ['inserted line', text([...base.slice(0, 2), base[1]!, ...base.slice(2)]), 3, /seq is 2, expected 3/],
    ['swapped lines 3 and 4', text([base[0]!, base[1]!, base[3]!, base[2]!, base[4]!, base[5]!]), 3, /seq is 4/],
    ['field edited on line 3', text(edit(2, (o) => (o.node = 'evil'))), 4, /hash of line 3/],
    ['prev edited on line 3', text(edit(2, (o) => (o.prev = 'f'.repeat(64)))), 3, /prev does not match/],
    ['seq edited on line 3', text(edit(2, (o) => (o.seq = 7))), 3, /seq is 7/],
    ['line 3 made invalid JSON', text([...base.slice(0, 2), base[2]!.slice(1), ...base.slice(3)]), 3, /not valid JSON/],
    ['empty line', text([...base.slice(0, 2), '', ...base.slice(2)]), 3, /empty line/],
    ['torn last write', text(base.slice(0, 5)) + base[5]!.slice(0, 20), 6, /torn/],
    ['complete last line without newline', text(base.slice(0, 5)) + base[5]!, 6, /torn/],
    ['wrong genesis', text(edit(0, (o) => (o.prev = '1'.repeat(64)))), 1, /genesis/],
    ['array line', text([...base.slice(0, 1), '[1,2]']), 2, /not a JSON object/],
    ['non-integer seq', text(edit(1, (o) => (o.seq = 2.5))), 2, /invalid "seq"/],
    ['missing prev', text(edit(1, (o) => delete o.prev)), 2, /invalid "prev"/],
    ['upper-case prev', text(edit(1, (o) => (o.prev = String(o.prev).toUpperCase()))), 2, /invalid "prev"/],
  ]
  for (const [name, input, line, reason] of cases) {
    t.match(verifyAuditText(input), { ok: false, line, reason }, name)
  }
})

t.test('a deleted last line is only visible against a kept head hash', async (t) => {
  const lines = chainLines(4)
  const head = verifyAuditText(text(lines))
  const cut = verifyAuditText(text(lines.slice(0, 3)))
  t.ok(head.ok && cut.ok)
  t.not(cut.ok && cut.lastHash, head.ok && head.lastHash)
})
