// Issue 9 item 8: a name that holds a valid certificate is not issued again without --replace.
import t from 'tap'
import { X509Certificate } from 'node:crypto'
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { initPki, issueBundle, issueServerCert, listCerts, readIndex, revoke, signCsr } from '../../pki/toolkit.js'
import { cliIn } from './run-cli.js'
import { ecKey, fingerprint, opensslCsr } from './helpers.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const dir = join(root, 'pki')
const work = join(root, 'device')
const bundles = join(dir, 'bundles')

t.before(async () => {
  await initPki(dir)
  await mkdir(work)
})

const cli = (...args: string[]) => cliIn(dir, ...args)

/** A CSR for `cn` made by openssl req, as on a device (a fresh P-256 key each time). */
const csrFor = (cn: string): Promise<{ path: string; pem: string }> => opensslCsr(work, `${cn}-${Math.random().toString(16).slice(2)}`, `/CN=${cn}`, ecKey('P-256'))

const status = async (serial: string): Promise<string | undefined> => (await listCerts(dir)).find((c) => c.serial === serial)?.status

t.test('issue and sign-csr refuse a name with a valid certificate of any role, and change nothing', async (t) => {
  const first = await issueBundle(dir, 'node-1', 'node', { keyType: 'ec' })
  await issueBundle(dir, 'ops-1', 'operator', { keyType: 'ec' })
  await issueServerCert(dir, { dns: ['controller.lan'], ip: [], keyType: 'ec' })
  const before = await fingerprint(dir)
  const taken = new RegExp(`"node-1" already holds a valid certificate \\(node, serial ${first.serial}, until [^)]+\\); pass --replace`)
  await t.rejects(issueBundle(dir, 'node-1', 'node', { outDir: join(root, 'elsewhere') }), taken, 'issue into another folder')
  await t.rejects(signCsr(dir, (await csrFor('node-1')).pem, 'node'), taken, 'sign-csr of the same CN')
  await t.rejects(issueBundle(dir, 'ops-1', 'node', { outDir: join(root, 'elsewhere') }), /"ops-1" already holds a valid certificate \(operator/, 'another role')
  await t.rejects(signCsr(dir, (await csrFor('controller.lan')).pem, 'node'), /"controller\.lan" already holds a valid certificate \(server/, 'a server certificate')
  t.same(await fingerprint(dir), before, 'PKI unchanged')
  t.same(await readdir(root).then((e) => e.includes('elsewhere')), false, 'no folder created')
  const res = await cli('issue', 'node-1', '--role', 'node', '--out', join(root, 'elsewhere'))
  t.equal(res.code, 1)
  t.match(res.err, /^pxe-pki: error: "node-1" already holds a valid certificate .*pass --replace/)
})

t.test('a revoked or expired certificate does not hold the name', async (t) => {
  const old = new Date(Date.now() - 3 * 86_400_000)
  await issueBundle(dir, 'node-old', 'node', { keyType: 'ec', days: 1, notBefore: old, now: old, outDir: join(root, 'old') })
  const again = await issueBundle(dir, 'node-old', 'node', { keyType: 'ec' })
  t.same(again.replaces, [], 'nothing valid to replace')
  await revoke(dir, { name: 'node-old' })
  const signed = await signCsr(dir, (await csrFor('node-old')).pem, 'node')
  t.same(signed.replaces, [])
})

t.test('issue --replace: new bundle in place, old one moved aside, old certificate still valid, index and output name it', async (t) => {
  const oldSerial = (await readIndex(dir)).certs.find((c) => c.name === 'node-1')!.serial
  const oldCert = await readFile(join(bundles, 'node-1', 'cert.pem'), 'utf8')
  const res = await cli('issue', 'node-1', '--role', 'node', '--key-type', 'ec', '--replace')
  t.equal(res.code, 0, res.err)
  const newSerial = /issued node certificate ([0-9a-f]{32})/.exec(res.out)?.[1]
  t.ok(newSerial)
  t.match(res.out, new RegExp(`replaces ${oldSerial}`))
  t.match(res.out, new RegExp(`node-1\\.replaced-${oldSerial}`), 'says where the old bundle went')
  t.match(res.out, new RegExp(`pxe-pki revoke --serial ${oldSerial}`), 'says how to revoke the old one afterwards')
  t.notMatch(res.out, /PRIVATE KEY/)
  t.equal(await readFile(join(bundles, `node-1.replaced-${oldSerial}`, 'cert.pem'), 'utf8'), oldCert, 'old bundle kept intact')
  t.equal(new X509Certificate(await readFile(join(bundles, 'node-1', 'cert.pem'), 'utf8')).serialNumber.toLowerCase(), newSerial)
  t.equal(await status(oldSerial), 'valid', 'the old certificate is not revoked automatically')
  const index = await readIndex(dir)
  t.same(index.certs.find((c) => c.serial === newSerial)?.replaces, [oldSerial])
  t.match(index.history.at(-1)?.detail, new RegExp(`replaces ${oldSerial}`))
  t.notOk((await readdir(bundles)).some((e) => e.startsWith('.')), 'no temporary folder left')
})

t.test('--replace with two valid certificates names both; sign-csr --replace says so on stderr', async (t) => {
  const valid = (await listCerts(dir)).filter((c) => c.name === 'node-1' && c.status === 'valid').map((c) => c.serial).sort()
  t.equal(valid.length, 2)
  const csr = await csrFor('node-1')
  const out = join(work, 'node-1.pem')
  const res = await cli('sign-csr', csr.path, '--role', 'node', '--replace', '--out', out)
  t.equal(res.code, 0, res.err)
  for (const serial of valid) {
    t.match(res.out, new RegExp(`replaces [0-9a-f, ]*${serial}`))
    t.match(res.out, new RegExp(`revoke --serial ${serial}`))
  }
  const serial = new X509Certificate(await readFile(out, 'utf8')).serialNumber.toLowerCase()
  t.same((await readIndex(dir)).certs.find((c) => c.serial === serial)?.replaces?.sort(), valid)
  for (const s of valid) t.equal(await status(s), 'valid')

  const printed = await cli('sign-csr', (await csrFor('node-1')).path, '--role', 'node', '--replace')
  t.equal(printed.code, 0, printed.err)
  t.match(printed.out, /^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n$/, 'stdout stays the certificate alone')
  t.match(printed.err, /replaces .*revoke --serial/, 'the replacement note goes to stderr')
})

t.test('issue --replace refuses to move a bundle folder whose certificate it cannot read', async (t) => {
  await mkdir(join(bundles, 'node-odd'))
  await writeFile(join(bundles, 'node-odd', 'notes.txt'), 'not a bundle')
  const before = await fingerprint(dir)
  await t.rejects(issueBundle(dir, 'node-odd', 'node', { keyType: 'ec' }), /bundle .*node-odd already exists; .*--replace/)
  await t.rejects(issueBundle(dir, 'node-odd', 'node', { keyType: 'ec', replace: true }), /node-odd holds no readable cert\.pem; move it away yourself/)
  t.same(await fingerprint(dir), before, 'PKI unchanged')
})

t.test('the help of issue and sign-csr documents --replace', async (t) => {
  for (const command of ['issue', 'sign-csr']) {
    const res = await cli(command, '--help')
    t.match(res.out, /--replace/, command)
  }
})
