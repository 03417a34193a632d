// The ops listener serves GET /metrics, /healthz and /readyz and nothing else; loopback unless
// allow_remote; a port it cannot take stops the start naming `ops`. Issue 10 item 2.
import t from 'tap'
import { mkdirSync } from 'node:fs'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { join } from 'node:path'
import { OPS_LIMITS } from '../../src/ops/ops-server.js'
import { makePki, startTestController, writeTestConfig } from '../e2e/harness.js'
import { runController } from '../e2e/process.js'
import { eventually, opsRequest, parseMetrics } from './scrape.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const ctl = await startTestController(pki, root)
t.teardown(() => ctl.running.stop())
const opsPort = ctl.opsPort!

t.test('healthz and readyz', async (t) => {
  const health = await opsRequest(opsPort, '/healthz')
  t.equal(health.status, 200)
  t.same(health.json, { status: 'ok' })
  t.match(health.headers['content-type'], /^application\/json/)
  t.equal(health.headers['cache-control'], 'no-store')
  const ready = await opsRequest(opsPort, '/readyz')
  t.equal(ready.status, 200)
  t.same(ready.json, { status: 'ready' })
  t.equal((await opsRequest(opsPort, '/readyz?verbose=1')).status, 200, 'a query string does not change the path')
})

t.test('/metrics is Prometheus text that parses', async (t) => {
  const res = await opsRequest(opsPort, '/metrics')
  t.equal(res.status, 200)
  t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  t.match(res.text, /^# HELP pxe_plan_generation /m)
  t.match(res.text, /^# TYPE pxe_request_duration_seconds histogram$/m)
  t.ok(parseMetrics(res.text).length > 50)
  t.notMatch(res.text, /PRIVATE KEY|BEGIN /, 'no key or certificate material')
})

t.test('anything else is 404 in the SPEC shape; no request bodies', async (t) => {
  const notFound: [string, string][] = [
    ['GET', '/'],
    ['GET', '/metrics/'],
    ['GET', '/METRICS'],
    ['GET', '/v1/checkin'],
    ['GET', '/healthz/../metrics'],
    ['POST', '/metrics'],
    ['PUT', '/readyz'],
    ['DELETE', '/healthz'],
    ['HEAD', '/healthz'],
    ['GET', 'http://127.0.0.1/metrics'],
  ]
  for (const [method, path] of notFound) {
    const res = await opsRequest(opsPort, path, { method })
    t.equal(res.status, 404, `${method} ${path}`)
    if (method !== 'HEAD') t.same(res.json, { error: 'not_found', message: res.json?.message }, `${method} ${path}: {error, message}`)
    t.type(res.json?.message ?? '', 'string')
  }
  const withBody = await opsRequest(opsPort, '/metrics', { body: 'x'.repeat(100) })
  t.equal(withBody.status, 413, 'a GET with a body is refused without reading it')
  t.same(withBody.json, { error: 'payload_too_large', message: 'the ops endpoint accepts no request body' })
  t.equal(withBody.headers.connection, 'close')
  const posted = await opsRequest(opsPort, '/v1/nodes/x/drain', { method: 'POST', body: '{"draining":true}' })
  t.equal(posted.status, 404, 'nothing on the ops listener changes state')
})

t.test('a small connection cap: idle sockets cannot take the listener from the probes for long', async (t) => {
  const idle: Socket[] = []
  t.teardown(() => idle.forEach((s) => s.destroy()))
  for (let i = 0; i < OPS_LIMITS.maxConnections; i++) {
    const s = connect(opsPort, '127.0.0.1')
    await new Promise((resolve) => s.once('connect', resolve))
    s.on('error', () => undefined)
    idle.push(s)
  }
  await t.rejects(opsRequest(opsPort, '/healthz'), 'one connection over the cap is dropped')
  idle.forEach((s) => s.destroy())
  t.ok(await eventually(2000, () => opsRequest(opsPort, '/healthz').then((r) => r.status === 200, () => false)), 'served again once they are gone')
})

t.test('the ops listener is loopback unless allow_remote', async (t) => {
  mkdirSync(join(root, 'remote'))
  const refused = await runController(['--config', writeTestConfig(pki, join(root, 'remote'), { ops: { host: '0.0.0.0', port: 0 } })], root)
  t.equal(refused.code, 1)
  t.match(refused.stderr, /key "ops\.host": "0\.0\.0\.0" is not a loopback address/)
  t.notMatch(refused.stdout, /listening/)

  const dir = testDir(t)
  const remote = await startTestController(pki, dir, { ops: { host: '0.0.0.0', port: 0, allow_remote: true } })
  t.teardown(() => remote.running.stop())
  t.equal((await opsRequest(remote.opsPort!, '/healthz')).status, 200, 'allow_remote: true serves on every address')
})

t.test('"ops": null turns it off', async (t) => {
  const dir = testDir(t)
  const off = await startTestController(pki, dir, { ops: null })
  t.teardown(() => off.running.stop())
  t.equal(off.opsPort, null)
})

t.test('a port the ops listener cannot take stops the start, naming ops', async (t) => {
  const blocker: Server = createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => blocker.close())
  const taken = (blocker.address() as { port: number }).port
  mkdirSync(join(root, 'taken'))
  const run = await runController(['--config', writeTestConfig(pki, join(root, 'taken'), { ops: { host: '127.0.0.1', port: taken } })], root)
  t.equal(run.code, 1)
  t.match(run.stderr, new RegExp(`key "ops": cannot listen on 127\\.0\\.0\\.1:${taken} \\(EADDRINUSE\\)`))
  t.notMatch(run.stdout, /controller listening/)
})
