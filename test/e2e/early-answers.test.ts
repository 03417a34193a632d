// Answers that used to bypass the error shape, the security headers and authentication (issue 9 item 10):
// fastify's router refusals (bad URL, over-long path parameter), a request without Host, an unmet Expect.
// Each now has the SPEC shape and the headers, echoes nothing of the request, and an unauthenticated
// client gets 401 before any routing answer.
import t, { type Test } from 'tap'
import { join } from 'node:path'
import { captureSecurityHeaders } from '../../src/http/security-headers.js'
import { bundle, makePki, opensslCert, request, startTestController, type Identity, type Reply, type RequestOptions } from './harness.js'
import { testDir } from '../support/test-dir.js'

const SECURITY_HEADERS = await captureSecurityHeaders()

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'node-a', 'node')
const op = await bundle(pki, 'ops-a', 'operator')
const client = ['extendedKeyUsage=clientAuth', 'keyUsage=digitalSignature,keyEncipherment', 'basicConstraints=CA:false']
const adminOu = opensslCert(pki, join(root, 'openssl'), 'admin', '/CN=node-x/OU=admin', client)
const ctl = await startTestController(pki, root)
t.teardown(() => ctl.running.stop())

const longDigits = '9'.repeat(300)
const longName = 'n'.repeat(300)
const cases: Array<{ name: string; path: string; opts?: RequestOptions; status: number; error: string }> = [
  { name: 'bad percent-encoding', path: '/v1/pl%zz', status: 400, error: 'invalid_request' },
  { name: 'bad percent-encoding in a parameter', path: '/v1/route/12%zz', status: 400, error: 'invalid_request' },
  { name: 'over-long guild id', path: `/v1/route/${longDigits}`, status: 414, error: 'uri_too_long' },
  { name: 'over-long node id', path: `/v1/nodes/${longName}/drain`, opts: { method: 'POST', body: { draining: true } }, status: 414, error: 'uri_too_long' },
  { name: 'Expect: 100-foo', path: '/v1/keys', opts: { headers: { expect: '100-foo' } }, status: 417, error: 'expectation_failed' },
]

function checkShape(t: Test, res: Reply, status: number, error: string): void {
  t.equal(res.status, status, 'status')
  t.same(Object.keys(res.json ?? {}).sort(), ['error', 'message'], 'exactly {error, message}')
  t.equal(res.json?.error, error, 'error code')
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) t.equal(res.headers[name], value, `header ${name}`)
  t.match(res.headers['content-type'], /^application\/json/, 'JSON')
  t.notMatch(res.text, /FST_ERR|zz|999999|nnnnnn/, 'no framework code and no echo of the request')
}

for (const c of cases) {
  t.test(`${c.name}: SPEC shape and headers for a valid client`, async (t) => {
    const who: Identity = c.path.includes('/drain') ? op : node
    checkShape(t, await request(ctl.port, pki.ca, who, c.path, c.opts), c.status, c.error)
  })
  t.test(`${c.name}: 401 first for a client without a usable identity`, async (t) => {
    checkShape(t, await request(ctl.port, pki.ca, adminOu, c.path, c.opts), 401, 'unauthenticated')
  })
}

t.test('no Host header: authenticated and served like any request (not a bare 400)', async (t) => {
  const ok = await request(ctl.port, pki.ca, node, '/v1/keys', { noHost: true })
  t.equal(ok.status, 200)
  t.ok(Array.isArray(ok.json.keys), 'the JWKS')
  checkShape(t, await request(ctl.port, pki.ca, adminOu, '/v1/keys', { noHost: true }), 401, 'unauthenticated')
  checkShape(t, await request(ctl.port, pki.ca, node, '/v1/nope', { noHost: true }), 404, 'not_found')
})

t.test('the controller serves on after all of these', async (t) => {
  const res = await request(ctl.port, pki.ca, op, '/v1/plan')
  t.equal(res.status, 200)
})
