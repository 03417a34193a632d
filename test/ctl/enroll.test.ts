// pxe-ctl enroll list: the queue as the controller sees it (SPEC "Device enrollment and renewal"), from the real
// bin against a real controller with an enrollment listener: one row per pending request, never a CSR or proof;
// pxe-ctl nodes shows how long each node's certificate has left.
import t from 'tap'
import { generateKeyPairSync } from 'node:crypto'
import { createToken } from '../../pki/token-store.js'
import { enrollProof, parseToken } from '../../src/core/enroll-token.js'
import { buildCsr, csrDer } from '../../src/der/csr.js'
import { request } from '../e2e/harness.js'
import { startFleet } from './support.js'

t.test('enroll list shows what waits for the signer, without the CSR or the proof', async (t) => {
  const fleet = await startFleet(t, { enroll: { host: '127.0.0.1', port: 0 } })
  const empty = await fleet.ctl('enroll', 'list')
  t.equal(empty.code, 0, empty.stderr)
  t.match(empty.stdout, /^no request waits for the signer\n0 waiting \(0 held in all\)\n$/)
  const { token } = await createToken(fleet.pki.dir, { names: 'rack-*', uses: 5 })
  const { id, secret } = parseToken(token)
  const csr = buildCsr('rack-7', generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey)
  const proof = enrollProof(secret, csrDer(csr))
  const queued = await request(fleet.controller.running.enrollPort!, fleet.pki.ca, null, '/v1/enroll', { body: { token_id: id, csr, proof } })
  t.equal(queued.status, 202)
  const list = await fleet.ctl('enroll', 'list')
  t.equal(list.code, 0, list.stderr)
  const lines = list.stdout.trimEnd().split('\n')
  t.match(lines[0], /^REQUEST\s+KIND\s+NAME\s+TOKEN\s+SOURCE\s+AGE$/)
  t.match(lines[1], new RegExp(`^${queued.json.request_id}\\s+enroll\\s+rack-7\\s+${id}\\s+127\\.0\\.0\\.1\\s+\\d+s$`))
  t.equal(lines[2], '1 waiting (1 held in all)')
  const json = await fleet.ctl('enroll', 'list', '-o', 'json')
  t.equal(json.code, 0)
  const parsed = JSON.parse(json.stdout)
  t.equal(parsed.requests[0].request_id, queued.json.request_id)
  for (const text of [list.stdout, json.stdout]) {
    t.notMatch(text, proof, 'no proof')
    t.notMatch(text, 'CERTIFICATE REQUEST', 'no CSR')
  }
  const help = await fleet.ctl('enroll', '--help')
  t.equal(help.code, 0)
  t.match(help.stdout, /enroll list/)
})

t.test('nodes shows how long each certificate has left', async (t) => {
  const fleet = await startFleet(t)
  await fleet.checkIn('n1')
  const res = await fleet.ctl('nodes')
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, /CERT LEFT/)
  t.match(res.stdout, /^n1\s.*\s(89|90)d(\d+h)?\s+\S+$/m, 'a 90-day bundle')
  const json = JSON.parse((await fleet.ctl('nodes', '-o', 'json')).stdout)
  t.match(json.nodes[0].cert_not_after, /^\d{4}-\d\d-\d\dT/)
})
