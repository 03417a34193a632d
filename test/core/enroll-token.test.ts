// SPEC "Device enrollment and renewal": the token's one form, the proof over the CSR, name patterns.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import {
  enrollProof, formatToken, isProofShaped, nameMatchesPattern, namePatternProblem, parseToken, proofMatches, tokenIdFromBytes, tokenProblem,
} from '../../src/core/enroll-token.js'

t.test('a token prints as pxe1.<id>.<secret> and parses back; bad forms are named without echoing the text', async (t) => {
  const token = { id: tokenIdFromBytes(randomBytes(7)), secret: randomBytes(32) }
  const text = formatToken(token)
  t.match(text, /^pxe1\.[a-z2-7]{10}\.[A-Za-z0-9_-]{43}$/)
  const back = parseToken(`  ${text}\n`)
  t.equal(back.id, token.id)
  t.ok(back.secret.equals(token.secret))
  const secret = text.split('.')[2]!
  for (const bad of ['', 'pxe1', `pxe2.${token.id}.${secret}`, `pxe1.${token.id.toUpperCase()}.${secret}`, `pxe1.${token.id}.${secret}x`, `pxe1.${token.id}.${secret.slice(1)}`, `pxe1.${token.id}1.${secret}`, `pxe1.${token.id}.${secret}.x`]) {
    const problem = tokenProblem(bad)
    t.type(problem, 'string', `refused: ${JSON.stringify(bad.slice(0, 12))}…`)
    t.notMatch(problem!, secret, 'the message never holds the secret')
    t.throws(() => parseToken(bad))
  }
})

t.test('token ids are 10 characters of base32 and use all of the alphabet', async (t) => {
  const seen = new Set<string>()
  for (let i = 0; i < 400; i++) for (const c of tokenIdFromBytes(randomBytes(7))) seen.add(c)
  t.equal(seen.size, 32)
  t.equal(tokenIdFromBytes(Buffer.alloc(7)), 'aaaaaaaaaa')
  t.equal(tokenIdFromBytes(Buffer.alloc(7, 0xff)), '7777777777')
})

t.test('a proof holds for its CSR and its secret only; compared whole', async (t) => {
  const secret = randomBytes(32)
  const der = randomBytes(300)
  const proof = enrollProof(secret, der)
  t.ok(isProofShaped(proof))
  t.ok(proofMatches(secret, der, proof))
  t.notOk(proofMatches(randomBytes(32), der, proof), 'another secret')
  const other = Buffer.from(der)
  other[10] = other[10]! ^ 1
  t.notOk(proofMatches(secret, other, proof), 'another CSR')
  t.notOk(proofMatches(secret, der, proof.slice(0, -1)), 'cut short')
  t.notOk(proofMatches(secret, der, `${proof}A`), 'too long')
  t.notOk(proofMatches(secret, der, proof.replace(/^./, (c) => (c === 'A' ? 'B' : 'A'))), 'one character changed')
  t.notOk(proofMatches(secret, der, ''), 'empty')
  t.notOk(isProofShaped('not a proof'))
})

t.test('name patterns: * is any run of name characters; the pattern obeys the name rule', async (t) => {
  const cases: [string, string, boolean][] = [
    ['rack7-*', 'rack7-node-01', true],
    ['rack7-*', 'rack7-', true],
    ['rack7-*', 'rack8-node', false],
    ['*-gpu', 'a-gpu', true],
    ['*-gpu', 'a-gpux', false],
    ['node-??', 'node-01', false], // no ? wildcard: ? is not a name character
    ['n*e*-1', 'node-x-1', true],
    ['n*e*-1', 'node-x-2', false],
    ['*', 'anything.at-all', true],
    ['exact', 'exact', true],
    ['exact', 'exactly', false],
    ['Rack*', 'rack1', false], // case matters, as in names
  ]
  for (const [pattern, name, expected] of cases) t.equal(nameMatchesPattern(pattern, name), expected, `${pattern} ~ ${name}`)
  t.equal(namePatternProblem('rack7-*'), null)
  t.equal(namePatternProblem('*'), null)
  t.type(namePatternProblem(''), 'string')
  t.type(namePatternProblem('-x*'), 'string')
  t.type(namePatternProblem('a/b*'), 'string')
  t.type(namePatternProblem('a?'), 'string')
  t.type(namePatternProblem('x'.repeat(65)), 'string')
  // linear: a pattern of stars against a long non-matching name answers at once
  const started = process.hrtime.bigint()
  t.equal(nameMatchesPattern('*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b', 'a'.repeat(64)), false)
  t.ok(process.hrtime.bigint() - started < 50_000_000n, 'no exponential backtracking')
})
