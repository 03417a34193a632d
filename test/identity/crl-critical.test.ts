// Critical CRL extensions: for each extension, critical or not, our decision to install a CRL must equal
// what OpenSSL itself says when it checks a client certificate against that CRL (`openssl verify
// -crl_check`). Installing a CRL OpenSSL refuses would lock every node out; refusing one it accepts
// would leave revocations unenforced.
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { decideCrl } from '../../src/identity/crl-decide.js'
import { parseCrl } from '../../src/identity/crl.js'
import { EXTENSION_VALUES as V, UNKNOWN_OID, craftCrl, subjectKeyIdHex, type CraftedExtension } from './crl-craft.js'
import { genCrl, issue, makeCa, tempDir } from './crl-openssl.js'

const dir = tempDir(t)
const ca = makeCa(dir, 'critical')
const caCertPath = join(ca.dir, 'ca.pem')
const caKeyPem = readFileSync(join(ca.dir, 'ca-key.pem'), 'utf8')
const client = issue(ca, 'node-1')
const inForce = parseCrl(genCrl(ca)) // CRL number 1
const keyId = subjectKeyIdHex(caCertPath)
const now = Date.now()
const thisUpdate = new Date(Math.floor(now / 1000) * 1000 - 60_000)
const nextUpdate = new Date(thisUpdate.getTime() + 7 * 86_400_000)

/** What OpenSSL says of the client certificate under `crlPem`: true when it verifies. */
function opensslAccepts(crlPem: string, label: string): { ok: boolean; output: string } {
  const path = join(dir, `${label}.pem`)
  writeFileSync(path, crlPem)
  const run = spawnSync('openssl', ['verify', '-CAfile', caCertPath, '-crl_check', '-CRLfile', path, client.certPath], { encoding: 'utf8' })
  const lines = `${run.stdout}${run.stderr}`.trim().split('\n')
  return { ok: run.status === 0, output: lines.find((l) => /error \d+ at/.test(l)) ?? lines.at(-1) ?? '' }
}

/** Our decision on the same CRL, against CRL 1 in force. */
function weAccept(crlPem: string): { ok: boolean; why: string } {
  const decision = decideCrl(inForce, crlPem, ca.cert, now)
  return { ok: decision.kind === 'load', why: decision.kind === 'refuse' ? decision.message : decision.kind }
}

const number = (critical = false): CraftedExtension => ({ oid: '2.5.29.20', critical, value: V.crlNumber(2) })
const reason = (critical = false): CraftedExtension => ({ oid: '2.5.29.21', critical, value: V.reasonCode() })

// [label, extension builder]: CRL-level cases always carry a CRL number (non-critical unless tested).
const crlLevel: [string, (critical: boolean) => CraftedExtension[]][] = [
  ['CRL number', (c) => [number(c)]],
  ['authorityKeyIdentifier', (c) => [number(), { oid: '2.5.29.35', critical: c, value: V.authorityKeyIdentifier(keyId) }]],
  ['issuerAltName', (c) => [number(), { oid: '2.5.29.18', critical: c, value: V.issuerAltName() }]],
  ['freshestCRL', (c) => [number(), { oid: '2.5.29.46', critical: c, value: V.freshestCrl() }]],
  ['authorityInfoAccess', (c) => [number(), { oid: '1.3.6.1.5.5.7.1.1', critical: c, value: V.authorityInfoAccess() }]],
  ['an unknown extension', (c) => [number(), { oid: UNKNOWN_OID, critical: c, value: V.unknown() }]],
]
// The entry is for another certificate (serial 0DEAD), so only the extension decides.
const entryLevel: [string, (critical: boolean) => CraftedExtension[]][] = [
  ['reasonCode', (c) => [reason(c)]],
  ['invalidityDate', (c) => [reason(), { oid: '2.5.29.24', critical: c, value: V.invalidityDate(new Date(now - 7_200_000)) }]],
  ['an unknown entry extension', (c) => [reason(), { oid: UNKNOWN_OID, critical: c, value: V.unknown() }]],
]

const verdicts = new Map<string, boolean>()
const cases = [
  ...crlLevel.map(([name, exts]) => ({ name: `CRL ${name}`, build: (c: boolean) => ({ extensions: exts(c), entry: [reason()] }) })),
  ...entryLevel.map(([name, exts]) => ({ name: `entry ${name}`, build: (c: boolean) => ({ extensions: [number()], entry: exts(c) }) })),
]
for (const { name, build } of cases) {
  for (const critical of [false, true]) {
    const label = `${name} ${critical ? 'critical' : 'not critical'}`
    t.test(label, async (t) => {
      const { extensions, entry } = build(critical)
      const pem = craftCrl({ caCertPem: ca.certPem, caKeyPem, thisUpdate, nextUpdate, extensions, entry: { serialHex: '0DEAD0', extensions: entry } })
      const theirs = opensslAccepts(pem, label.replace(/\W+/g, '-'))
      const ours = weAccept(pem)
      verdicts.set(label, theirs.ok)
      t.comment(`openssl: ${theirs.output}; ours: ${ours.why}`)
      t.equal(ours.ok, theirs.ok, `${label}: we ${ours.ok ? 'install' : 'refuse'} it, OpenSSL ${theirs.ok ? 'accepts' : 'refuses'} the client`)
    })
  }
}

t.test('the table is not vacuous: OpenSSL accepts some and refuses others', async (t) => {
  t.equal(verdicts.size, cases.length * 2)
  for (const [label, ok] of verdicts) if (label.endsWith('not critical')) t.equal(ok, true, `${label}: accepted`)
  t.equal(verdicts.get('CRL authorityKeyIdentifier critical'), true, 'a critical AKI is handled by OpenSSL')
  t.equal(verdicts.get('CRL CRL number critical'), false, 'a critical CRL number is not')
  t.equal(verdicts.get('entry reasonCode critical'), false, 'nor a critical reasonCode')
})

t.test('a refusal says which extension and why', async (t) => {
  const pem = craftCrl({ caCertPem: ca.certPem, caKeyPem, thisUpdate, nextUpdate, extensions: [number(), { oid: '2.5.29.18', critical: true, value: V.issuerAltName() }] })
  t.match(decideCrl(inForce, pem, ca.cert, now), { kind: 'refuse', reason: 'unsupported', message: /CRL extension 2\.5\.29\.18 is marked critical/ })
})
