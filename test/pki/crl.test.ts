import t from 'tap'
import { X509Certificate } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import tls from 'node:tls'
import type { AddressInfo } from 'node:net'
import { initPki, issueServerCert, issueBundle, revoke, writeCrl, listCerts, readIndex } from '../../pki/toolkit.js'
import { openssl } from './helpers.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const dir = join(root, 'pki')
const crlPath = join(dir, 'crl.pem')
const serials: Record<string, string> = {}

t.before(async () => {
  await initPki(dir)
  await issueServerCert(dir, { dns: ['localhost'], ip: ['127.0.0.1'] })
  for (const name of ['node-a', 'node-b', 'node-c']) serials[name] = (await issueBundle(dir, name, 'node')).serial
  serials['node-a2'] = (await issueBundle(dir, 'node-a', 'node', { outDir: join(root, 'rotated'), replace: true })).serial
  const old = new Date(Date.now() - 5 * 86_400_000)
  serials['node-a-old'] = (await issueBundle(dir, 'node-a', 'node', { outDir: join(root, 'old'), days: 1, notBefore: old, now: old, replace: true })).serial
})

/** The CRL as OpenSSL reads it: verified under the CA, its number and its revoked serials. */
async function readCrl(path = crlPath): Promise<{ number: number; serials: string[]; text: string }> {
  const res = await openssl(['crl', '-in', path, '-noout', '-text', '-CAfile', join(dir, 'ca.pem'), '-verify'])
  if (!res.ok || !/verify OK/.test(res.out)) throw new Error(`openssl crl -verify failed: ${res.out}`)
  const number = Number(/CRL Number:\s*\n?\s*(\d+)/.exec(res.out)?.[1])
  const found = [...res.out.matchAll(/Serial Number: ([0-9A-F]+)/g)].map((m) => m[1]!.toLowerCase()).sort()
  return { number, serials: found, text: res.out }
}

t.test('the initial CRL: PEM label X509 CRL, v2, signed by the CA, number 1, no entries, 7 days', async (t) => {
  const pem = await readFile(crlPath, 'utf8')
  t.match(pem, /^-----BEGIN X509 CRL-----\n[\s\S]+\n-----END X509 CRL-----\n$/)
  const crl = await readCrl()
  t.equal(crl.number, 1)
  t.same(crl.serials, [])
  t.match(crl.text, /Version 2/)
  t.match(crl.text, /Signature Algorithm: sha256WithRSAEncryption/)
  t.match(crl.text, /Authority Key Identifier/)
  const last = Date.parse(/Last Update: (.+)/.exec(crl.text)![1]!)
  const next = Date.parse(/Next Update: (.+)/.exec(crl.text)![1]!)
  t.equal(next - last, 7 * 86_400_000)
})

t.test('revoke by serial (any case, colons): the CRL lists exactly that serial, number 2', async (t) => {
  const typed = serials['node-b']!.toUpperCase().match(/../g)!.join(':')
  const r = await revoke(dir, { serial: typed }, { reason: 'superseded' })
  t.same(r, { revoked: [serials['node-b']], crlNumber: 2 })
  const crl = await readCrl()
  t.equal(crl.number, 2)
  t.same(crl.serials, [serials['node-b']])
  t.match(crl.text, /CRL Reason Code:\s*\n?\s*Superseded/)
})

t.test('revoke by name: every unexpired certificate of the name, not the expired one', async (t) => {
  const r = await revoke(dir, { name: 'node-a' }, { reason: 'keyCompromise' })
  t.same(r.revoked.sort(), [serials['node-a'], serials['node-a2']].sort())
  t.equal(r.crlNumber, 3)
  const crl = await readCrl()
  t.equal(crl.number, 3)
  t.same(crl.serials, [serials['node-a'], serials['node-a2'], serials['node-b']].sort())
  t.match(crl.text, /Key Compromise/)
  const status = Object.fromEntries((await listCerts(dir)).map((c) => [c.serial, c.status]))
  t.match(status, { [serials['node-a']!]: 'revoked', [serials['node-a-old']!]: 'expired', [serials['node-c']!]: 'valid' })
  const index = await readIndex(dir)
  t.match(index.certs.find((c) => c.serial === serials['node-a']), { reason: 'keyCompromise', revoked_at: String })
  await t.rejects(revoke(dir, { name: 'node-a' }), /nothing to revoke/)
  await t.rejects(revoke(dir, { serial: serials['node-b']! }), /already revoked/)
})

t.test('crl: a fresh CRL with the next number, also written to --out', async (t) => {
  const out = join(root, 'published.crl')
  t.same(await writeCrl(dir, { out, crlDays: 2 }), { crlNumber: 4 })
  t.equal(await readFile(out, 'utf8'), await readFile(crlPath, 'utf8'))
  const crl = await readCrl(out)
  t.equal(crl.number, 4)
  t.same(crl.serials, [serials['node-a'], serials['node-a2'], serials['node-b']].sort())
})

t.test('openssl verify -crl_check refuses the revoked certificate and accepts the others', async (t) => {
  const check = (cert: string) => openssl(['verify', '-crl_check', '-CAfile', join(dir, 'ca.pem'), '-CRLfile', crlPath, cert])
  const revoked = await check(join(dir, 'bundles', 'node-a', 'cert.pem'))
  t.notOk(revoked.ok)
  t.match(revoked.out, /certificate revoked/)
  t.ok((await check(join(dir, 'bundles', 'node-c', 'cert.pem'))).ok)
})

t.test("Node's TLS stack accepts the CRL and refuses the revoked client with CERT_REVOKED", async (t) => {
  const read = (...p: string[]) => readFile(join(dir, ...p))
  const server = tls.createServer({
    ca: await read('ca.pem'), cert: await read('server.pem'), key: await read('server-key.pem'), crl: await read('crl.pem'),
    requestCert: true, rejectUnauthorized: true,
  })
  const refused: string[] = []
  server.on('tlsClientError', (_err, socket) => refused.push(String((socket as tls.TLSSocket).authorizationError)))
  server.on('secureConnection', (socket) => socket.end('welcome'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const port = (server.address() as AddressInfo).port
  const talk = async (name: string): Promise<string> => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca: await read('ca.pem'), cert: await read('bundles', name, 'cert.pem'), key: await read('bundles', name, 'key.pem') })
    return new Promise((resolve) => {
      let data = ''
      socket.on('data', (d: Buffer) => (data += d.toString()))
      socket.on('error', () => undefined)
      socket.on('close', () => resolve(data))
    })
  }
  t.equal(await talk('node-c'), 'welcome', 'a valid node is served')
  t.equal(await talk('node-a'), '', 'the revoked node gets nothing')
  t.same(refused, ['CERT_REVOKED'])
  const cert = new X509Certificate(await read('bundles', 'node-a', 'cert.pem'))
  t.equal(cert.serialNumber.toLowerCase(), serials['node-a'])
})
