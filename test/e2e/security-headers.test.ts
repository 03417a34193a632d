// Every answer carries exactly the same security header set — helmet's, captured once at start-up
// (issue 11): successes, errors, 401, 404, 429, the router's own refusals and the answers Node's HTTP
// parser forces (400 malformed, 408 too slow, 431 headers too large).
import t from 'tap'
import { connect } from 'node:tls'
import { captureSecurityHeaders } from '../../src/http/security-headers.js'
import { bundle, checkinBody, makePki, opensslCert, request, startTestController, type Identity } from './harness.js'
import { join } from 'node:path'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'node-a', 'node')
const op = await bundle(pki, 'ops-a', 'operator')
const limited = await bundle(pki, 'ops-l', 'operator')
const admin = opensslCert(pki, join(root, 'openssl'), 'admin', '/CN=node-x/OU=admin', ['extendedKeyUsage=clientAuth', 'basicConstraints=CA:false'])
const ctl = await startTestController(pki, root, { rate_limits: { node: { per_second: 1000, burst: 1000 }, operator: { per_second: 0.01, burst: 5 } } })
t.teardown(() => ctl.running.stop())
const expected = await captureSecurityHeaders()
const ANSWER_HEADERS = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive', 'retry-after'])

/** The headers of a raw request's answer (for what a normal client cannot send). */
function raw(id: Identity, bytes: string, opts: { trickle?: boolean } = {}): Promise<{ status: number; headers: Record<string, string> }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: ctl.port, ca: pki.ca, cert: id.cert, key: id.key, servername: 'localhost' })
    let text = ''
    socket.on('secureConnect', () => (opts.trickle ? socket.write(bytes.slice(0, 10)) : socket.write(bytes)))
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')))
    socket.on('error', reject)
    socket.on('close', () => {
      const [head = ''] = text.split('\r\n\r\n')
      const [statusLine = '', ...lines] = head.split('\r\n')
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]))
      resolve({ status: Number(statusLine.split(' ')[1]), headers })
    })
  })
}

const securityPart = (headers: Record<string, string | string[] | undefined>) =>
  Object.fromEntries(Object.entries(headers).filter(([k]) => !ANSWER_HEADERS.has(k)).map(([k, v]) => [k, String(v)]))

t.test('the captured set is helmet\'s full set, HSTS and the API CSP included', async (t) => {
  t.match(expected, {
    'strict-transport-security': 'max-age=31536000; includeSubDomains',
    'content-security-policy': "default-src 'none';frame-ancestors 'none'",
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'SAMEORIGIN',
  })
  t.ok(Object.keys(expected).length >= 8, `${Object.keys(expected).length} headers`)
})

t.test('every kind of answer carries exactly that set', async (t) => {
  const answers: Array<[string, number, Record<string, string | string[] | undefined>]> = []
  const add = async (label: string, p: Promise<{ status: number; headers: Record<string, string | string[] | undefined> }>) => {
    const r = await p
    answers.push([label, r.status, r.headers])
  }
  await add('200 check-in', request(ctl.port, pki.ca, node, '/v1/checkin', { body: checkinBody('node-a') }))
  await add('200 plan', request(ctl.port, pki.ca, op, '/v1/plan'))
  await add('400 bad body', request(ctl.port, pki.ca, node, '/v1/checkin', { body: { node_id: 'node-a' } }))
  await add('401', request(ctl.port, pki.ca, admin, '/v1/plan'))
  await add('403', request(ctl.port, pki.ca, node, '/v1/plan'))
  await add('404', request(ctl.port, pki.ca, node, '/v1/nothing'))
  await add('413', request(ctl.port, pki.ca, node, '/v1/checkin', { rawBody: `{"x":"${'y'.repeat(5000)}"}` }))
  await add('415', request(ctl.port, pki.ca, node, '/v1/checkin', { rawBody: 'x', contentType: 'text/plain' }))
  for (let i = 0; i < 5; i++) await request(ctl.port, pki.ca, limited, '/v1/keys')
  await add('429', request(ctl.port, pki.ca, limited, '/v1/keys'))
  await add('400 bad URL (router)', request(ctl.port, pki.ca, node, '/v1/pl%zz'))
  await add('414 (router)', request(ctl.port, pki.ca, node, `/v1/route/${'9'.repeat(300)}`))
  await add('417 (Node)', request(ctl.port, pki.ca, node, '/v1/keys', { headers: { expect: '100-foo' } }))
  await add('400 malformed HTTP (parser)', raw(node, 'GET /v1/keys HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'))
  await add('431 (parser)', raw(node, `GET /v1/keys HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(9000)}\r\n\r\n`))
  await add('408 (parser, headers too slow)', raw(node, 'GET /v1/keys HTTP/1.1\r\n', { trickle: true }))
  const statuses = answers.map(([label, status]) => `${label}:${status}`)
  t.same(statuses, ['200 check-in:200', '200 plan:200', '400 bad body:400', '401:401', '403:403', '404:404', '413:413', '415:415', '429:429', '400 bad URL (router):400', '414 (router):414', '417 (Node):417', '400 malformed HTTP (parser):400', '431 (parser):431', '408 (parser, headers too slow):408'])
  for (const [label, , headers] of answers) t.same(securityPart(headers), expected, `${label}: exactly the captured set`)
})
