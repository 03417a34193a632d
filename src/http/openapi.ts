/**
 * The OpenAPI 3.1 document of the controller, built from the code: the endpoints of the policy table as
 * endpoints.ts describes them, the ops listener's paths (ops/ops-endpoints.ts), and the zod schemas the
 * routes parse with and answer in. zod's own z.toJSONSchema writes JSON Schema 2020-12, the dialect of
 * OpenAPI 3.1, so no converter is needed. `npm run openapi` writes it to docs/openapi.json; a test fails
 * when that file is not what this module builds.
 */
import { z } from 'zod'
import { ENDPOINT_ROLES, type Endpoint } from '../identity/policy.js'
import type { Role } from '../identity/principal.js'
import { ERROR_STATUS, type ErrorCode } from '../errors.js'
import { NAME_MAX_LENGTH, NAME_PATTERN, nameSchema } from '../core/names.js'
import { DEFAULT_OPS } from '../config.js'
import { OPS_ENDPOINT_DOCS } from '../ops/ops-endpoints.js'
import { OPS_PATHS } from '../ops/ops-server.js'
import { COMMON_ERRORS, ENDPOINT_DOCS, type EndpointDoc } from './endpoints.js'
import { enrollQueuedSchema, enrollStatusSchema, errorAnswerSchema } from './answer-schemas.js'
import { enrollBodySchema, ENROLL_BODY_LIMIT_BYTES, requestParamsSchema } from '../service/enroll-service.js'
import { ERROR_MEANINGS } from './error-meanings.js'

type Json = Record<string, unknown>

const SCHEMAS = '#/components/schemas/'
const ref = (id: string): Json => ({ $ref: `${SCHEMAS}${id}` })

/** The security scheme of each role: both are client certificates of the controller's CA, told apart by OU. */
const ROLE_SCHEMES: Readonly<Record<Role, string>> = { node: 'nodeCertificate', operator: 'operatorCertificate', signer: 'signerCertificate' }

const TAG_NODE = 'node'
const TAG_OPERATOR = 'operator'
const TAG_SHARED = 'node and operator'
const TAG_OPS = 'ops'
const TAG_SIGNER = 'signer'
const TAG_SHARED_SIGNER = 'operator and signer'
const TAG_ENROLL = 'enrollment'

/** An mTLS route pattern (`/v1/route/:guild_id`) in OpenAPI's form (`/v1/route/{guild_id}`). */
export function openApiPath(pattern: string): string {
  return pattern.replace(/:([A-Za-z0-9_]+)/g, '{$1}')
}

const upperFirst = (s: string) => s.charAt(0).toUpperCase() + s.slice(1)

/** Collects the zod schemas to publish under components.schemas, each under a stable name. */
class SchemaSet {
  private readonly registries = { input: z.registry<{ id: string }>(), output: z.registry<{ id: string }>() }

  /** Registers `schema` as `id` (read as a request when io is input, as an answer when output); returns its $ref. */
  add(schema: z.ZodType, id: string, io: 'input' | 'output'): Json {
    const registry = this.registries[io]
    const known = registry.get(schema)
    if (known === undefined) registry.add(schema, { id })
    else if (known.id !== id) throw new Error(`schema registered twice, as ${known.id} and ${id}`)
    return ref(id)
  }

  /** The $ref of `schema` when registered already (under any name), else registers it as `id`. */
  reuse(schema: z.ZodType, id: string, io: 'input' | 'output'): Json {
    const known = this.registries[io].get(schema)
    return known === undefined ? this.add(schema, id, io) : ref(known.id)
  }

  /** Every schema as JSON Schema 2020-12, keyed by name in byte order. */
  toJson(): Json {
    const all: Json = {}
    for (const io of ['input', 'output'] as const) {
      const { schemas } = z.toJSONSchema(this.registries[io], {
        target: 'draft-2020-12',
        io,
        unrepresentable: 'throw',
        uri: (id) => `${SCHEMAS}${id}`,
        // The name rule is a refinement (one validator for every use); JSON Schema gets it as a pattern.
        override: (ctx) => {
          if (ctx.zodSchema === nameSchema) Object.assign(ctx.jsonSchema, { pattern: NAME_PATTERN.source, minLength: 1, maxLength: NAME_MAX_LENGTH })
        },
      })
      for (const [id, schema] of Object.entries(schemas)) {
        // A component is not a document of its own: no $schema, and $id may not carry a fragment.
        const { $schema: _dialect, $id: _id, ...body } = schema as Json
        if (id in all && JSON.stringify(all[id]) !== JSON.stringify(body)) throw new Error(`schema ${id} differs as a request and as an answer`)
        all[id] = body
      }
    }
    return sortedKeys(all)
  }
}

function sortedKeys<T>(record: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
}

/** The error answers of `codes`, one per status, each listing its codes and what they mean. */
function errorResponses(codes: readonly ErrorCode[]): Record<string, Json> {
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of codes) {
    const status = ERROR_STATUS[code]
    const list = byStatus.get(status) ?? []
    if (!list.includes(code)) list.push(code)
    byStatus.set(status, list)
  }
  const out: Record<string, Json> = {}
  for (const status of [...byStatus.keys()].sort((a, b) => a - b)) {
    const list = byStatus.get(status)!
    const retryAfter = list.includes('rate_limited') || list.includes('reshard_in_progress')
    out[String(status)] = {
      description: list.map((code) => `\`${code}\`: ${ERROR_MEANINGS[code]}`).join('; '),
      ...(retryAfter ? { headers: { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } } } : {}),
      content: { 'application/json': { schema: ref('Error') } },
    }
  }
  return out
}

/** Served answers and error answers together; one status cannot be both. */
function mergeResponses(served: Record<string, Json>, errors: Record<string, Json>): Record<string, Json> {
  const clash = Object.keys(served).find((status) => status in errors)
  if (clash !== undefined) throw new Error(`status ${clash} is documented both as an answer and as an error`)
  return { ...served, ...errors }
}

/** The tag of an endpoint, from the roles that may call it. */
function tagOf(roles: readonly Role[]): string {
  if (roles.length > 1) return roles.includes('signer') ? TAG_SHARED_SIGNER : TAG_SHARED
  return roles[0] === 'node' ? TAG_NODE : roles[0] === 'signer' ? TAG_SIGNER : TAG_OPERATOR
}

/** One operation of the mTLS API. */
function operation(endpoint: Endpoint, doc: EndpointDoc, schemas: SchemaSet): Json {
  const roles = ENDPOINT_ROLES[endpoint]!
  const name = upperFirst(doc.operationId)
  const parameters = doc.params === undefined
    ? []
    : Object.entries(doc.params.shape).map(([param, schema]) => ({
        name: param,
        in: 'path',
        required: true,
        schema: schemas.add(schema as z.ZodType, schema === nameSchema ? 'Name' : upperFirst(param.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase())), 'input'),
      }))
  for (const [param, schema] of Object.entries(doc.query?.shape ?? {})) {
    const inner = (schema as z.ZodOptional<z.ZodType>).unwrap()
    // a query value is text: documented as the string it is sent as, with its pattern
    const text = inner instanceof z.ZodPipe ? (inner.in as z.ZodType) : inner
    parameters.push({ name: param, in: 'query', required: false, schema: schemas.add(text, `${name}${upperFirst(param)}`, 'input') })
  }
  const body = doc.body
  const requestBody = body === undefined
    ? undefined
    : {
        required: true,
        description: `${body.description}; at most ${body.limitBytes} bytes`,
        content: Object.fromEntries(
          body.mediaTypes.map((type) => [type, { schema: body.schema === null ? { type: 'string' } : schemas.add(body.schema, `${name}Body`, 'input') }]),
        ),
      }
  return {
    operationId: doc.operationId,
    summary: doc.summary,
    description: `${doc.description}\n\nRoles: ${roles.join(', ')}.`,
    tags: [tagOf(roles)],
    security: roles.map((role) => ({ [ROLE_SCHEMES[role]]: [] })),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(requestBody === undefined ? {} : { requestBody }),
    responses: mergeResponses({
      [String(doc.answer.status)]: {
        description: doc.answer.description,
        content: { 'application/json': { schema: schemas.add(doc.answer.schema, `${name}Answer`, 'output') } },
      },
    }, errorResponses([...doc.errors, ...COMMON_ERRORS])),
  }
}

/** The operations of the ops listener: plain HTTP on its own port, no authentication. */
function opsPaths(schemas: SchemaSet): Record<string, Json> {
  const server = {
    url: 'http://{host}:{port}',
    description: 'the ops listener (plain HTTP; "ops" in the config)',
    variables: { host: { default: DEFAULT_OPS.host }, port: { default: String(DEFAULT_OPS.port) } },
  }
  const paths: Record<string, Json> = {}
  for (const path of OPS_PATHS) {
    const doc = OPS_ENDPOINT_DOCS[path]
    const responses: Record<string, Json> = {}
    for (const [status, answer] of Object.entries(doc.answers)) {
      responses[status] = {
        description: answer.description,
        content: { [answer.mediaType]: { schema: answer.schema === null ? { type: 'string' } : schemas.add(answer.schema.zod, answer.schema.name, 'output') } },
      }
    }
    paths[path] = {
      servers: [server],
      get: { operationId: doc.operationId, summary: doc.summary, description: doc.description, tags: [TAG_OPS], security: [], responses: mergeResponses(responses, errorResponses(doc.errors)) },
    }
  }
  return paths
}

/** The enrollment listener's two operations: TLS with the server certificate, no client certificate, on its own port. */
function enrollPaths(schemas: SchemaSet): Record<string, Json> {
  const server = { url: 'https://{controller}:{port}', description: 'the enrollment listener ("enroll" in the config)', variables: { controller: { default: 'controller.example' }, port: { default: '8444' } } }
  const common: ErrorCode[] = ['rate_limited', 'not_leader', 'unavailable']
  const enroll = {
    operationId: 'enroll',
    summary: 'Enroll: queue a CSR under a bootstrap token',
    description:
      "A node with no certificate sends its CSR (P-256 or RSA >= 2048, CN = its name), the token id and the proof: base64url HMAC-SHA256 under the token's secret of " +
      '"pxe-enroll-v1\\n" followed by the CSR\'s DER. The controller checks the shape, the CSR\'s signature, key and name, and queues it for the signer (which checks the token, ' +
      'the proof and the policy); the same CSR again is the same request. Limited per source address, per token id and in total (10,000 pending).',
    tags: [TAG_ENROLL],
    security: [],
    requestBody: { required: true, description: `the enrollment; at most ${ENROLL_BODY_LIMIT_BYTES} bytes`, content: { 'application/json': { schema: schemas.add(enrollBodySchema, 'EnrollBody', 'input') } } },
    responses: mergeResponses(
      { '202': { description: 'the request queued', content: { 'application/json': { schema: schemas.reuse(enrollQueuedSchema, 'EnrollQueued', 'output') } } } },
      errorResponses(['invalid_request', 'payload_too_large', 'unsupported_media_type', ...common]),
    ),
  }
  const status = {
    operationId: 'enrollmentStatus',
    summary: 'Poll an enrollment',
    description: 'pending, issued (with the certificate, the CA certificate and the plan keys) or denied (with the reason); gone (410) 1 hour after the request if still pending, 10 minutes after its answer.',
    tags: [TAG_ENROLL],
    security: [],
    parameters: [{ name: 'request_id', in: 'path', required: true, schema: schemas.reuse(requestParamsSchema.shape.request_id, 'RequestId', 'input') }],
    responses: mergeResponses(
      { '200': { description: 'the request', content: { 'application/json': { schema: schemas.reuse(enrollStatusSchema, 'EnrollStatus', 'output') } } } },
      errorResponses(['invalid_request', 'not_found', 'gone', 'uri_too_long', ...common]),
    ),
  }
  return { '/v1/enroll': { servers: [server], post: enroll }, '/v1/enroll/{request_id}': { servers: [server], get: status } }
}

/** The whole document; `version` is the package's. */
export function buildOpenApiDocument(version: string): Json {
  const schemas = new SchemaSet()
  schemas.add(errorAnswerSchema, 'Error', 'output')
  const paths: Record<string, Json> = {}
  for (const endpoint of Object.keys(ENDPOINT_DOCS) as Endpoint[]) {
    const [method, pattern] = endpoint.split(' ') as [string, string]
    const path = openApiPath(pattern)
    paths[path] = { ...paths[path], [method.toLowerCase()]: operation(endpoint, ENDPOINT_DOCS[endpoint], schemas) }
  }
  Object.assign(paths, opsPaths(schemas))
  for (const [path, item] of Object.entries(enrollPaths(schemas))) paths[path] = { ...paths[path], ...item }
  const errorCodes = (Object.keys(ERROR_STATUS) as ErrorCode[]).map((code) => `- \`${code}\` (${ERROR_STATUS[code]}): ${ERROR_MEANINGS[code]}`).join('\n')
  const certificate = (role: Role) => ({
    type: 'mutualTLS',
    description: `A client certificate issued directly by the controller's CA with subject CN=<name>, OU=${role}, extended key usage clientAuth, not a CA, valid now and not revoked.`,
  })
  return {
    openapi: '3.1.0',
    info: {
      title: 'Discord-PXE controller API',
      version,
      description:
        'The mTLS control plane that assigns Discord gateway shards to PXE-booted machines. Every endpoint of the API needs a client certificate of the ' +
        'controller\'s CA; its OU is the caller\'s role. The ops listener (metrics, health, readiness) is a second, plain-HTTP server.\n\n' +
        `Every refusal is JSON {"error": "<code>", "message": "<sentence>"}:\n\n${errorCodes}`,
    },
    servers: [{ url: 'https://{controller}:{port}', description: 'the mTLS API ("listen" in the config)', variables: { controller: { default: 'controller.example' }, port: { default: '8443' } } }],
    tags: [
      { name: TAG_NODE, description: 'called by nodes (the pxe-node agent)' },
      { name: TAG_OPERATOR, description: 'called by operators (pxe-ctl)' },
      { name: TAG_SHARED, description: 'called by nodes and operators' },
      { name: TAG_SIGNER, description: "called by the CA host's signer (pxe-pki signer)" },
      { name: TAG_SHARED_SIGNER, description: 'called by operators and the signer' },
      { name: TAG_ENROLL, description: 'the enrollment listener: TLS without a client certificate, for nodes that have none yet (pxe-node --enroll)' },
      { name: TAG_OPS, description: 'the ops listener: plain HTTP for Prometheus and probes, no authentication, read-only' },
    ],
    paths: sortedKeys(paths),
    components: {
      schemas: schemas.toJson(),
      securitySchemes: { [ROLE_SCHEMES.node]: certificate('node'), [ROLE_SCHEMES.operator]: certificate('operator'), [ROLE_SCHEMES.signer]: certificate('signer') },
      headers: {
        RetryAfter: { description: 'whole seconds to wait, rounded up (retry_after_ms in the body is exact)', schema: { type: 'integer', minimum: 0 } },
      },
    },
  }
}

/** The document as docs/openapi.json holds it: two-space JSON, a newline at the end. */
export function openApiText(version: string): string {
  return `${JSON.stringify(buildOpenApiDocument(version), null, 2)}\n`
}
