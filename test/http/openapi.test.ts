// The API reference (docs/openapi.json, docs/api.md's route table) against the code: the committed files are
// what the generator builds; the document is valid OpenAPI 3.1 under a standard validator; every route a real
// controller registers is documented and every documented one is served; and real answers over mTLS and from
// the ops listener, served and refused, have a documented status and parse with the documented schemas.
import t, { type Test } from 'tap'
import { ENROLL_ROUTES } from '../../src/http/enroll-app.js'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Validator } from '@seriousme/openapi-schema-validator'
import { ERROR_STATUS, type ErrorCode } from '../../src/errors.js'
import { ENDPOINT_ROLES, type Endpoint } from '../../src/identity/policy.js'
import { COMMON_ERRORS, ENDPOINT_DOCS } from '../../src/http/endpoints.js'
import { errorAnswerSchema } from '../../src/http/answer-schemas.js'
import { openApiPath } from '../../src/http/openapi.js'
import { OPS_ENDPOINT_DOCS } from '../../src/ops/ops-endpoints.js'
import { OpsServer, OPS_PATHS, type OpsPath } from '../../src/ops/ops-server.js'
import { evaluateReadiness } from '../../src/ops/readiness.js'
import { API_PAGE, expectedFiles, OPENAPI_FILE, routeTable, withRouteTable, TABLE_BEGIN, TABLE_END } from '../../scripts/openapi.js'
import { bundle, checkinBody, makePki, request, startTestController, type Reply } from '../e2e/harness.js'
import { testDir } from '../support/test-dir.js'

type Json = Record<string, any>
const committed = JSON.parse(readFileSync(OPENAPI_FILE, 'utf8')) as Json

// A real controller over mTLS, for the routes it registers and the answers it gives.
const root = testDir(t)
const pki = await makePki(root)
const [nodeA, op] = await Promise.all([bundle(pki, 'node-a', 'node'), bundle(pki, 'ops-alice', 'operator')])
const ctl = await startTestController(pki, root, { total_shards: 64, max_concurrency: 16 })
t.teardown(() => ctl.running.stop())

t.test('docs/openapi.json and the route table of docs/api.md are what the code describes', async (t) => {
  const expected = expectedFiles()
  t.ok(readFileSync(OPENAPI_FILE, 'utf8') === expected.openapi, 'docs/openapi.json differs from what the code describes: run npm run openapi')
  t.ok(readFileSync(API_PAGE, 'utf8') === expected.apiPage, 'the route table of docs/api.md differs from docs/openapi.json: run npm run openapi')
  t.ok(expected.openapi.endsWith('}\n'), 'the file ends with a newline')
  t.throws(() => withRouteTable('# no markers\n', committed), /markers/, 'a page without the markers is refused, not silently left alone')
  const table = routeTable(committed)
  t.match(table, /\| POST \| `\/v1\/nodes\/\{node_id\}\/drain` \| operator \| `application\/json` \| 200 400 401 403 409 413 414 415 429 503 \|/)
  t.match(readFileSync(API_PAGE, 'utf8'), `${TABLE_BEGIN}\n${table}\n${TABLE_END}`)
})

t.test('the document is valid OpenAPI 3.1 under a standard validator, and every $ref resolves', async (t) => {
  const validator = new Validator()
  const result = await validator.validate(structuredClone(committed))
  t.same(result.errors ?? [], [], 'no validation errors')
  t.equal(result.valid, true)
  t.equal(validator.version, '3.1')
  // The validator refuses a broken copy: it really checks the document.
  const broken = structuredClone(committed)
  broken.paths['/v1/plan'].get.responses = 'none'
  t.equal((await new Validator().validate(broken)).valid, false, 'a document with a malformed operation is refused')

  const refs: string[] = []
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk)
    else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) k === '$ref' ? refs.push(String(x)) : walk(x)
  }
  walk(committed)
  t.ok(refs.length > 20)
  const missing = refs.filter((r) => {
    const [, section, name] = /^#\/components\/(schemas|headers)\/(.+)$/.exec(r) ?? []
    return section === undefined || committed.components[section]?.[name!] === undefined
  })
  t.same(missing, [], 'every $ref names a component of the document')
})

t.test('roles, bodies and refusals in the document follow the policy table and the error codes', async (t) => {
  for (const endpoint of Object.keys(ENDPOINT_ROLES) as Endpoint[]) {
    const [method, pattern] = endpoint.split(' ') as [string, string]
    const op = committed.paths[openApiPath(pattern)]?.[method.toLowerCase()]
    if (!t.ok(op, `${endpoint} is documented`)) continue
    const schemes = (op.security as Json[]).flatMap((s) => Object.keys(s)).sort()
    t.same(schemes, ENDPOINT_ROLES[endpoint]!.map((r) => `${r}Certificate`).sort(), `${endpoint}: who may call it`)
    const doc = ENDPOINT_DOCS[endpoint]
    const statuses = [...doc.errors, ...COMMON_ERRORS].map((c) => String(ERROR_STATUS[c]))
    for (const status of statuses) t.ok(op.responses[status], `${endpoint}: ${status} documented`)
    t.equal(op.requestBody !== undefined, doc.body !== undefined, `${endpoint}: request body documented iff it takes one`)
  }
  const codes = committed.components.schemas.Error.properties.error.enum as string[]
  t.same(codes, Object.keys(ERROR_STATUS), 'the error schema lists every code of errors.ts')
  t.same(Object.keys(committed.paths).filter((p) => !p.startsWith('/v1/')).sort(), [...OPS_PATHS].sort(), 'the ops listener\'s paths, no more, no fewer')
})

/** Checks a real answer of the mTLS API against the document and the schemas it was generated from. */
function conforms(t: Test, endpoint: Endpoint, reply: Reply): void {
  const [method, pattern] = endpoint.split(' ') as [string, string]
  const op = committed.paths[openApiPath(pattern)][method.toLowerCase()]
  const doc = ENDPOINT_DOCS[endpoint]
  t.ok(op.responses[String(reply.status)], `${endpoint}: status ${reply.status} is documented`)
  t.match(String(reply.headers['content-type']), /^application\/json/)
  if (reply.status === doc.answer.status) {
    const parsed = doc.answer.schema.safeParse(reply.json)
    t.ok(parsed.success, `${endpoint}: the ${reply.status} answer parses with its schema${parsed.success ? '' : `: ${JSON.stringify(parsed.error.issues[0])}`}`)
    return
  }
  const parsed = errorAnswerSchema.safeParse(reply.json)
  t.ok(parsed.success, `${endpoint}: the ${reply.status} refusal parses with the error schema${parsed.success ? '' : `: ${JSON.stringify(parsed.error.issues[0])}`}`)
  const code = reply.json.error as ErrorCode
  t.equal(ERROR_STATUS[code], reply.status, `${code} has its status`)
  t.ok([...doc.errors, ...COMMON_ERRORS].includes(code), `${endpoint}: ${code} is a documented refusal`)
}

t.test('every route the controller registers is in the document, and every documented route is registered', async (t) => {
  const app = ctl.running.app
  // printRoutes draws a tree ("├── /v1/renew (POST)" then "│   └── /:request_id (GET)"): a line's path is its
  // parents' paths (by indentation) followed by its own part
  const parents: string[] = []
  const registered = app
    .printRoutes({ commonPrefix: false })
    .split('\n')
    .flatMap((line) => {
      const m = /^([│ ]*)[├└]── (\/\S*)(?: \(([A-Z, ]+)\))?$/.exec(line)
      if (m === null) return []
      const depth = m[1]!.length / 4
      parents.length = depth
      const path = `${parents.join('')}${m[2]}`
      parents.push(m[2]!)
      return m[3] === undefined ? [] : m[3].split(', ').map((method) => `${method} ${path}`)
    })
  t.ok(registered.length >= 9, `read ${registered.length} routes from printRoutes`)
  // every operation of /v1/ paths, by the listener that serves it: the mTLS API, or the enrollment listener (tag "enrollment")
  const operations = Object.entries(committed.paths)
    .filter(([path]) => path.startsWith('/v1/'))
    .flatMap(([path, item]) =>
      Object.entries(item as Json)
        .filter(([key]) => key !== 'servers')
        .map(([method, op]) => ({ route: `${method.toUpperCase()} ${path.replace(/\{([^}]+)\}/g, ':$1')}`, enrollment: ((op as Json).tags as string[]).includes('enrollment') })),
    )
  const documented = operations.filter((o) => !o.enrollment).map((o) => o.route)
  t.same([...registered].sort(), [...documented].sort(), 'registered = documented')
  t.same(operations.filter((o) => o.enrollment).map((o) => o.route).sort(), [...ENROLL_ROUTES].sort(), 'the enrollment listener serves exactly its documented routes')
  for (const endpoint of documented) {
    const [method, url] = endpoint.split(' ') as [string, string]
    t.ok(app.hasRoute({ method: method as 'GET', url }), `${endpoint} is served`)
  }
})

t.test('real answers over mTLS, served and refused, match the documented statuses and schemas', async (t) => {
  const call = (id: typeof op, path: string, opts: Parameters<typeof request>[4] = {}) => request(ctl.port, pki.ca, id, path, opts)
  const checkin = await call(nodeA, '/v1/checkin', { body: checkinBody('node-a', { capacity: 32, next_ready_shards: 0 }) })
  t.equal(checkin.status, 200)
  conforms(t, 'POST /v1/checkin', checkin)
  conforms(t, 'POST /v1/checkin', await call(nodeA, '/v1/checkin', { body: checkinBody('node-b') }))
  conforms(t, 'POST /v1/checkin', await call(nodeA, '/v1/checkin', { body: { ...checkinBody('node-a'), extra: 1 } }))
  const grant = await call(nodeA, '/v1/identify', { body: { node_id: 'node-a', shard_id: 0 } })
  t.equal(grant.json.granted, true)
  conforms(t, 'POST /v1/identify', grant)
  const wait = await call(nodeA, '/v1/identify', { body: { node_id: 'node-a', shard_id: 16 } })
  t.equal(wait.json.reason, 'bucket_busy', 'the same bucket within the interval waits')
  conforms(t, 'POST /v1/identify', wait)
  conforms(t, 'GET /v1/route/:guild_id', await call(op, '/v1/route/81384788765712384'))
  conforms(t, 'GET /v1/route/:guild_id', await call(nodeA, '/v1/route/012'))
  conforms(t, 'GET /v1/keys', await call(nodeA, '/v1/keys'))
  conforms(t, 'GET /v1/plan', await call(op, '/v1/plan'))
  conforms(t, 'GET /v1/plan', await call(nodeA, '/v1/plan'))
  const refused = await call(op, '/v1/nodes/node-a/drain', { body: { draining: true } })
  t.equal(refused.json.error, 'insufficient_capacity', 'draining the only node strands shards')
  conforms(t, 'POST /v1/nodes/:node_id/drain', refused)
  conforms(t, 'POST /v1/nodes/:node_id/drain', await call(op, '/v1/nodes/node-z/drain', { body: { draining: false } }))
  const started = await call(op, '/v1/reshard', { body: { total_shards: 32 } })
  t.equal(started.status, 202)
  conforms(t, 'POST /v1/reshard', started)
  conforms(t, 'POST /v1/reshard', await call(op, '/v1/reshard', { body: { total_shards: 48 } }))
  const during = await call(op, '/v1/plan')
  t.equal(during.json.reshard?.phase, 'identifying')
  conforms(t, 'GET /v1/plan', during)
  conforms(t, 'POST /v1/checkin', await call(nodeA, '/v1/checkin', { body: checkinBody('node-a', { capacity: 32, next_ready_shards: 0 }) }))
  conforms(t, 'DELETE /v1/reshard', await call(op, '/v1/reshard', { method: 'DELETE' }))
  conforms(t, 'DELETE /v1/reshard', await call(op, '/v1/reshard', { method: 'DELETE' }))
  const crl = readFileSync(join(pki.dir, 'crl.pem'))
  const pushed = await call(op, '/v1/crl', { rawBody: crl, contentType: 'application/pkix-crl' })
  t.equal(pushed.json.changed, false, 'the CRL in force, pushed again')
  conforms(t, 'POST /v1/crl', pushed)
  conforms(t, 'POST /v1/crl', await call(op, '/v1/crl', { rawBody: crl, contentType: 'text/plain' }))
})

// ---- the ops listener ----

/** One plain-HTTP GET (or another method) on the ops listener. */
async function opsGet(port: number, path: string, method = 'GET'): Promise<{ status: number; type: string; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { method })
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() }
}

t.test('the ops listener serves the documented paths, with the documented answers, and nothing else', async (t) => {
  const port = ctl.opsPort!
  for (const path of OPS_PATHS) {
    const res = await opsGet(port, path)
    const answer = OPS_ENDPOINT_DOCS[path].answers[res.status]
    t.ok(answer, `${path}: status ${res.status} is documented`)
    if (answer === undefined) continue
    t.ok(committed.paths[path].get.responses[String(res.status)].content[answer.mediaType], `${path}: ${answer.mediaType} in the document`)
    t.equal(res.type, answer.schema === null ? answer.mediaType : `${answer.mediaType}; charset=utf-8`)
    if (answer.schema !== null) t.ok(answer.schema.zod.safeParse(JSON.parse(res.body)).success, `${path}: the answer parses with ${answer.schema.name}`)
    t.equal((await opsGet(port, path, 'POST')).status, 404, `POST ${path} is not served`)
  }
  t.equal((await opsGet(port, '/v1/plan')).status, 404, 'no other path')

  // Not ready: the 503 answer of /readyz, from an ops server whose checks fail.
  const notReady = await OpsServer.start('127.0.0.1', 0, {
    metrics: { text: async () => '', contentType: 'text/plain' },
    readiness: () => evaluateReadiness([() => 'stopping', () => 'state_not_durable']),
  })
  t.teardown(() => notReady.close())
  const res = await opsGet(notReady.port, '/readyz' satisfies OpsPath)
  t.equal(res.status, 503)
  const answer = OPS_ENDPOINT_DOCS['/readyz'].answers[503]!
  t.ok(answer.schema?.zod.safeParse(JSON.parse(res.body)).success, 'the 503 answer parses with NotReady')
  t.same(JSON.parse(res.body).reasons, ['state_not_durable', 'stopping'])
})
