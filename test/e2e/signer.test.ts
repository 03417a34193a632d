// The CA host's side of enrollment over real TLS (SPEC "Device enrollment and renewal"): `pxe-pki signer`,
// `pxe-pki enroll list|approve|deny` and `pxe-pki token` run as real child processes (the build in dist/)
// against a controller started with the harness, with certificates made by pki/ at run time. Nodes are
// played by hand: a CSR made here, its proof, POST /v1/enroll on the enrollment listener with no client
// certificate. The controller's own checks are in test/e2e/enroll.test.ts.
import t, { type Test as Tap } from 'tap'
import { spawn } from 'node:child_process'
import { generateKeyPairSync, X509Certificate, type KeyObject } from 'node:crypto'
import { copyFileSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { buildCsr, csrDer } from '../../src/der/csr.js'
import { enrollProof, parseToken } from '../../src/core/enroll-token.js'
import { initPki, issueBundle, signCsr, writeCrl } from '../../pki/toolkit.js'
import { crlNeedsRefresh, crlWindow } from '../../pki/enroll-issue.js'
import { checkinBody, makePki, request, startTestController, type Identity, type Reply } from './harness.js'
import { cliEntry, REPO_ROOT, runCli, type CliResult } from '../pki/run-cli.js'
import { openssl } from '../pki/helpers.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
// The controller reads a copy of the CRL, so that only what the signer pushes reaches it.
const controllerCrl = join(root, 'controller-crl.pem')
copyFileSync(join(pki.dir, 'crl.pem'), controllerCrl)
const ctl = await startTestController(pki, join(root, 'c1'), {
  tls: { ca: join(pki.dir, 'ca.pem'), cert: join(pki.dir, 'server.pem'), key: join(pki.dir, 'server-key.pem'), crl: controllerCrl },
  enroll: { host: '127.0.0.1', port: 0, poll_after_ms: 200, per_address: { per_second: 1000, burst: 1000 } },
})
t.teardown(() => ctl.running.stop())
const signerDir = (await issueBundle(pki.dir, 'ca-signer', 'signer', { keyType: 'ec' })).bundleDir
const controller = `https://127.0.0.1:${ctl.port}`
const link = ['--controller', controller, '--bundle', signerDir, '--dir', pki.dir]

/** Everything the CA host printed, scanned for secrets at the end. */
const printed: string[] = []
const tokens: string[] = []
const proofs: string[] = []

async function pxePki(...args: string[]): Promise<CliResult> {
  const res = await runCli(args)
  printed.push(res.stdout, res.stderr)
  return res
}

/** `pxe-pki token create` as an operator runs it; the token is the one stdout line. */
async function makeToken(t: Tap, ...flags: string[]): Promise<string> {
  const res = await pxePki('token', 'create', ...flags, '--dir', pki.dir)
  t.equal(res.code, 0, `token create ${flags.join(' ')}`)
  const token = res.stdout.trim()
  tokens.push(token)
  return token
}

/** A node at boot: a key in memory, a CSR, the proof, POST /v1/enroll with no client certificate. */
async function enroll(t: Tap, token: string, name: string, key: KeyObject = newKey()): Promise<{ id: string; key: KeyObject }> {
  const csr = buildCsr(name, key)
  const { id, secret } = parseToken(token)
  const proof = enrollProof(secret, csrDer(csr))
  proofs.push(proof)
  const reply = await request(ctl.running.enrollPort!, pki.ca, null, '/v1/enroll', { body: { token_id: id, csr, proof } })
  t.equal(reply.status, 202, `enrollment of ${name} queued`)
  return { id: reply.json.request_id as string, key }
}

const newKey = () => generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey
const poll = (id: string) => request(ctl.running.enrollPort!, pki.ca, null, `/v1/enroll/${id}`)
const mtls = (id: Identity | null, path: string, opts: Parameters<typeof request>[4] = {}) => request(ctl.port, pki.ca, id, path, opts)
const identityOf = (issued: Reply, key: KeyObject): Identity => ({ cert: issued.json.certificate as string, key: key.export({ type: 'pkcs8', format: 'pem' }) as string })
const auditLines = () => readFileSync(join(ctl.root, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>)

await cliEntry() // fails early with "run npm run build" when dist/ is missing

t.test('an auto token: signer --once issues a node certificate OpenSSL verifies under the CA, and the node checks in with it', async (t) => {
  const token = await makeToken(t, '--names', 'rack-*', '--uses', '5')
  const node = await enroll(t, token, 'rack-a1')
  const res = await pxePki('signer', '--once', ...link)
  t.equal(res.code, 0, res.stderr)
  t.match(res.stderr, /signer: issued 1, denied 0, held 0/)
  const issued = await poll(node.id)
  t.equal(issued.json.status, 'issued')
  t.equal(issued.json.ca, pki.ca)
  const file = join(root, 'rack-a1.pem')
  writeFileSync(file, issued.json.certificate)
  const verify = await openssl(['verify', '-CAfile', join(pki.dir, 'ca.pem'), file])
  t.ok(verify.ok, `openssl verify: ${verify.out}`)
  const subject = (await openssl(['x509', '-in', file, '-noout', '-subject', '-nameopt', 'RFC2253'])).out
  t.match(subject, /OU=node/)
  t.match(subject, /CN=rack-a1/)
  t.ok(new X509Certificate(issued.json.certificate).checkPrivateKey(node.key), 'the key the node made')
  t.equal((await mtls(identityOf(issued, node.key), '/v1/checkin', { body: checkinBody('rack-a1') })).status, 200)
  const idle = await pxePki('signer', '--once', ...link)
  t.equal(idle.code, 0)
  t.equal(idle.stderr, '', 'quiet when there is nothing to do')
})

t.test('a manual token: held and listed, enroll list shows it, enroll approve issues it; enroll deny tells the node why', async (t) => {
  const token = await makeToken(t, '--names', 'desk-*', '--uses', '2', '--approve', 'manual')
  const a = await enroll(t, token, 'desk-1')
  const b = await enroll(t, token, 'desk-2')
  const pass = await pxePki('signer', '--once', ...link)
  t.equal(pass.code, 0, pass.stderr)
  t.match(pass.stderr, /held 2/)
  t.match(pass.stderr, new RegExp(`held ${a.id} \\(enroll desk-1\\): the token asks for manual approval`))
  t.same((await poll(a.id)).json, { status: 'pending' })
  const listed = await pxePki('enroll', 'list', ...link)
  t.equal(listed.code, 0, listed.stderr)
  t.match(listed.stdout, new RegExp(`${a.id}\\s+enroll\\s+desk-1\\s+${parseToken(token).id}.*HELD\\s+the token asks for manual approval`))
  const json = JSON.parse((await pxePki('enroll', 'list', '--json', ...link)).stdout) as Record<string, unknown>[]
  t.match(json.find((e) => e.request_id === b.id), { kind: 'enroll', name: 'desk-2', action: 'held', detail: 'the token asks for manual approval' })
  t.notOk(JSON.stringify(json).includes('CERTIFICATE REQUEST'), 'no CSR in the list')
  const approved = await pxePki('enroll', 'approve', a.id, ...link)
  t.equal(approved.code, 0, approved.stderr)
  t.match(approved.stdout, /^issued [0-9a-f]+ to desk-1/)
  t.equal((await poll(a.id)).json.status, 'issued')
  t.match(auditLines().find((l) => l.event === 'enroll_issued' && l.name === 'desk-1'), { signer: 'ca-signer' })
  const denied = await pxePki('enroll', 'deny', b.id, '--reason', 'not in the inventory', ...link)
  t.equal(denied.code, 0, denied.stderr)
  t.same((await poll(b.id)).json, { status: 'denied', reason: 'not in the inventory' })
  const again = await pxePki('enroll', 'approve', b.id, ...link)
  t.equal(again.code, 1)
  t.match(again.stderr, /no pending request .*already answered/)
  const unknown = await pxePki('enroll', 'deny', 'AAAAAAAAAAAAAAAAAAAAAA', ...link)
  t.equal(unknown.code, 1)
  t.match(unknown.stderr, /request AAAAAAAAAAAAAAAAAAAAAA is unknown to the controller/)
  const bad = await pxePki('enroll', 'approve', 'nope', ...link)
  t.equal(bad.code, 2)
  t.match(bad.stderr, /invalid request id "nope"/)
})

t.test('re-enrollment: under allow the old certificate is revoked and the controller enforces the pushed CRL; under manual it is held', async (t) => {
  const allow = await makeToken(t, '--names', 'boot-*', '--uses', '4', '--reenroll', 'allow')
  const first = await enroll(t, allow, 'boot-1')
  t.equal((await pxePki('signer', '--once', ...link)).code, 0)
  const old = identityOf(await poll(first.id), first.key)
  t.equal((await mtls(old, '/v1/checkin', { body: checkinBody('boot-1') })).status, 200, 'the first certificate works')
  // the node reboots with no state: a new key, the same token
  const second = await enroll(t, allow, 'boot-1')
  const pass = await pxePki('signer', '--once', ...link)
  t.equal(pass.code, 0, pass.stderr)
  t.match(pass.stderr, /issued 1, denied 0, held 0; CRL \d+ pushed/)
  const renewed = identityOf(await poll(second.id), second.key)
  // the re-enrollment's certificate starts a second after the one it supersedes: used before that, the
  // handshake is refused (the agent waits the same way: src/agent/enrollment.ts)
  const startsAt = Date.parse(new X509Certificate(renewed.cert).validFrom) + 1000
  if (startsAt > Date.now()) await new Promise((resolve) => setTimeout(resolve, startsAt - Date.now()))
  const refused = await mtls(old, '/v1/checkin', { body: checkinBody('boot-1') }).then((r) => r.status, () => 'handshake refused')
  t.ok(refused === 'handshake refused' || refused === 401, `the superseded certificate is refused after the push (${refused})`)
  t.equal((await mtls(renewed, '/v1/checkin', { body: checkinBody('boot-1') })).status, 200, 'the new one checks in')

  const manual = await makeToken(t, '--names', 'boot-*', '--uses', '4')
  const third = await enroll(t, manual, 'boot-1')
  const held = await pxePki('signer', '--once', ...link)
  t.match(held.stderr, new RegExp(`held ${third.id} \\(enroll boot-1\\): re-enrollment: boot-1 holds a valid certificate`))
  t.same((await poll(third.id)).json, { status: 'pending' })
})

t.test('the CRL is re-signed and pushed when half of its validity is gone', async (t) => {
  const fresh = await crlWindow(pki.dir)
  t.notOk(crlNeedsRefresh(fresh, new Date()), 'a fresh CRL is left alone')
  t.ok(crlNeedsRefresh(fresh, new Date(fresh.thisUpdate.getTime() + 3.6 * 86_400_000)), 'past half of 7 days: refreshed')
  // a 1-day CRL signed 13 hours ago: 11 hours left
  await writeCrl(pki.dir, { crlDays: 1, now: new Date(Date.now() - 13 * 3_600_000) })
  const pass = await pxePki('signer', '--once', '--crl-days', '2', ...link)
  t.equal(pass.code, 0, pass.stderr)
  t.match(pass.stderr, /CRL re-signed \(half of its validity was gone\) and CRL \d+ pushed/)
  const now = await crlWindow(pki.dir)
  t.ok(Date.now() - now.thisUpdate.getTime() < 60_000, 'crl.pem signed now')
  t.equal(now.nextUpdate!.getTime() - now.thisUpdate.getTime(), 2 * 86_400_000, '--crl-days 2')
  t.match(auditLines().filter((l) => l.event === 'crl_loaded').at(-1), { source: 'push', by: 'ca-signer' })
})

t.test('roles: node and operator certificates get 403 on the signer endpoints, a signer 403 on node endpoints', async (t) => {
  const node = await bundleIdentity('rack-z9', 'node')
  const operator = await bundleIdentity('alice', 'operator')
  const signer = { cert: readFileSync(join(signerDir, 'cert.pem'), 'utf8'), key: readFileSync(join(signerDir, 'key.pem'), 'utf8') }
  for (const [who, id] of [['node', node], ['operator', operator]] as const) {
    t.equal((await mtls(id, '/v1/enroll/requests')).status, 403, `${who}: GET /v1/enroll/requests`)
    t.equal((await mtls(id, '/v1/enroll/requests/AAAAAAAAAAAAAAAAAAAAAA', { body: { denied: 'x' } })).status, 403, `${who}: POST an answer`)
  }
  const crl = { rawBody: readFileSync(join(pki.dir, 'crl.pem')), contentType: 'application/pkix-crl' }
  t.equal((await mtls(node, '/v1/crl', crl)).status, 403, 'node: POST /v1/crl (operators and signers push CRLs)')
  t.equal((await mtls(signer, '/v1/checkin', { body: checkinBody('ca-signer') })).status, 403, 'a signer cannot check in')
  const wrongBundle = await pxePki('signer', '--once', '--controller', controller, '--bundle', join(pki.dir, 'bundles', 'alice'), '--dir', pki.dir)
  t.equal(wrongBundle.code, 1)
  t.match(wrongBundle.stderr, /operator certificate of alice, not a signer one/)
})

t.test('a signer posting a certificate for another key, another name, from another CA, or with role operator: 400, audited, still pending', async (t) => {
  const token = await makeToken(t, '--names', 'shelf-*', '--approve', 'manual')
  const key = newKey()
  const { id } = await enroll(t, token, 'shelf-1', key)
  const csr = buildCsr('shelf-1', key)
  const otherPki = join(root, 'other-pki')
  await initPki(otherPki)
  const cases: [string, string][] = [
    ['another key', (await signCsr(pki.dir, buildCsr('shelf-1', newKey()), 'node', { replace: true })).certPem],
    ['another name', (await signCsr(pki.dir, buildCsr('shelf-2', key), 'node', { replace: true })).certPem],
    ['another CA', (await signCsr(otherPki, csr, 'node')).certPem],
    ['role operator', (await signCsr(pki.dir, csr, 'operator', { replace: true })).certPem],
  ]
  const signer = { cert: readFileSync(join(signerDir, 'cert.pem'), 'utf8'), key: readFileSync(join(signerDir, 'key.pem'), 'utf8') }
  for (const [what, certificate] of cases) {
    const before = auditLines().filter((l) => l.event === 'enroll_refused').length
    const reply = await mtls(signer, `/v1/enroll/requests/${id}`, { body: { certificate } })
    t.equal(reply.status, 400, what)
    t.match(reply.json.message, /does not fit the request/, what)
    t.equal(auditLines().filter((l) => l.event === 'enroll_refused').length, before + 1, `${what}: audited enroll_refused`)
    t.same((await poll(id)).json, { status: 'pending' }, `${what}: still pending`)
  }
})

t.test('the signer as a service: passes every --interval, issues what arrives, and stops on SIGTERM with 0', async (t) => {
  const token = await makeToken(t, '--names', 'svc-*', '--uses', '3')
  const child = spawn(process.execPath, [await cliEntry(), 'signer', '--interval', '1', ...link], { cwd: REPO_ROOT, env: { ...process.env, NODE_OPTIONS: '' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stderr += d))
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  const node = await enroll(t, token, 'svc-1')
  let status = 'pending'
  for (let i = 0; i < 100 && status === 'pending'; i++) {
    await new Promise((r) => setTimeout(r, 100))
    status = (await poll(node.id)).json.status as string
  }
  t.equal(status, 'issued', 'issued by the running signer')
  child.kill('SIGTERM')
  t.equal(await exited, 0, 'SIGTERM: the pass finishes, exit 0')
  printed.push(stderr)
  t.match(stderr, /^signer ca-signer: signing with .* a pass every 1 s/)
  t.match(stderr, /signer: issued 1, denied \d+, held \d+/)
  t.match(stderr, /signer: stopped\n$/)
})

t.test('--once with no controller reachable: exit 1 and the reason', async (t) => {
  const res = await pxePki('signer', '--once', '--controller', 'https://127.0.0.1:9', '--bundle', signerDir, '--dir', pki.dir)
  t.equal(res.code, 1)
  t.match(res.stderr, /no controller answered GET \/v1\/enroll\/requests\?limit=500: https:\/\/127\.0\.0\.1:9: connection refused/)
  t.match(res.stderr, /pxe-pki: error: signer --once: no controller could be reached/)
})

t.test('no token secret or proof in what the CA host printed, the audit log or the controller state', async (t) => {
  const files = [join(ctl.root, 'audit.log'), ...readdirSync(join(ctl.root, 'state')).map((f) => join(ctl.root, 'state', f)).filter((f) => statSync(f).isFile())]
  const haystacks = [...printed.map((text, i) => [`output ${i}`, text] as const), ...files.map((f) => [f, readFileSync(f, 'utf8')] as const)]
  t.ok(tokens.length >= 5 && proofs.length >= 8, 'the scan has something to look for')
  for (const token of tokens) {
    const secret = token.split('.')[2]!
    for (const [where, text] of haystacks) {
      // the bare token is printed once, by token create: that is its only appearance
      if (text.trim() === token) continue
      t.notOk(text.includes(secret), `no token secret in ${where}`)
    }
  }
  for (const proof of proofs) for (const [where, text] of haystacks) t.notOk(text.includes(proof), `no proof in ${where}`)
})

async function bundleIdentity(name: string, role: 'node' | 'operator'): Promise<Identity> {
  const out = await issueBundle(pki.dir, name, role, { keyType: 'ec', replace: true })
  return { cert: readFileSync(join(out.bundleDir, 'cert.pem'), 'utf8'), key: readFileSync(join(out.bundleDir, 'key.pem'), 'utf8') }
}
