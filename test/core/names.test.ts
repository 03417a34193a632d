import t from 'tap'
import { assertValidName, InvalidNameError, isValidName, nameProblem, nameSchema } from '../../src/core/names.js'

const valid = ['a', 'A', '0', 'compaq-01', 'Zeta', 'node_1.rack-2', 'a..b', '9-', 'x'.repeat(64), 'a'.padEnd(64, '.')]
const invalid: [string, unknown][] = [
  ['dot-dot', '..'],
  ['single dot', '.'],
  ['leading dash', '-x'],
  ['leading underscore', '_x'],
  ['65 characters', 'x'.repeat(65)],
  ['non-ASCII letter', 'é'],
  ['non-ASCII inside', 'nodé-1'],
  ['space', 'a b'],
  ['empty', ''],
  ['trailing newline', 'a\n'],
  ['slash', 'a/b'],
  ['path traversal', '../evil'],
  ['not a string', 42],
]

t.test('valid names pass every form of the rule', async (t) => {
  for (const name of valid) {
    t.ok(isValidName(name), name)
    t.equal(nameProblem(name), null, name)
    t.equal(assertValidName(name), name)
    t.ok(nameSchema.safeParse(name).success, name)
  }
})

t.test('invalid names fail every form of the rule', async (t) => {
  for (const [label, name] of invalid) {
    t.notOk(isValidName(name), label)
    t.type(nameProblem(name), 'string', label)
    t.throws(() => assertValidName(name, 'node id'), InvalidNameError, label)
    t.notOk(nameSchema.safeParse(name).success, label)
  }
})

t.test('64 characters is the limit', async (t) => {
  t.ok(isValidName('n'.repeat(64)))
  t.notOk(isValidName('n'.repeat(65)))
  t.match(nameProblem('n'.repeat(65)), /at most 64/)
})
