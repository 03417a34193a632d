// docs/config-reference.md: the committed page is what the generator writes, and read back as an operator
// would read it, every key the schema accepts is on it with the type, range, default and presence the
// parser really enforces (each documented bound accepted, just past it refused with an error naming the key).
import t from 'tap'
import { chmodSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { z } from 'zod'
import { ConfigError, configFileSchema, loadConfig, parseConfig } from '../src/config.js'
import { configKeyGroups, configKeys } from '../src/config-reference/entries.js'
import { CONFIG_REFERENCE_PATH, FACTS_SEPARATOR, renderConfigReference } from '../src/config-reference/render.js'
import { testDir } from './support/test-dir.js'
import { withEdit } from './support/with-edit.js'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const page = readFileSync(join(ROOT, CONFIG_REFERENCE_PATH), 'utf8')

/** A config that sets every key the schema has, so that each key can be probed, removed or replaced. */
const FULL = {
  listen: { host: '0.0.0.0', port: 8443 },
  tls: { ca: 'ca.pem', cert: 'server.pem', key: 'server-key.pem', crl: 'crl.pem' },
  plan_keys: 'plan-keys.json',
  state_dir: 'state',
  audit_log: 'audit.log',
  controller_id: 'pxe-controller-1',
  total_shards: 65536,
  max_concurrency: 1,
  lease_seconds: 30,
  identify_interval_ms: 5100,
  daily_identify_limit: 1000,
  planner: 'stable',
  session_handoff: { allowed_hosts: ['gateway.discord.gg'], ttl_seconds: 60 },
  rest: { global_per_second: 50, safety: 0.9, invalid_per_10_minutes: 10000 },
  rate_limits: { node: { per_second: 5, burst: 20 }, operator: { per_second: 20, burst: 40 }, signer: { per_second: 200, burst: 1000 } },
  max_connections_per_address: 64,
  max_connections: 20000,
  ops: { host: '127.0.0.1', port: 9464, allow_remote: true },
  enroll: { host: '10.0.0.2', port: 8444, poll_after_ms: 2000, per_address: { per_second: 2, burst: 20 }, per_address_pending: 8, per_token_pending: 2000 },
  ha: {
    etcd: { endpoints: ['https://10.0.0.5:2379'], ca: 'etcd/ca.pem', cert: 'etcd/client.pem', key: 'etcd/client-key.pem', server_name: 'etcd.pxe.internal', max_txn_ops: 128 },
    prefix: '/pxe/',
    lease_ttl_seconds: 10,
  },
}

/** Every key path the zod schema accepts, found by walking its objects (not through the generator's JSON Schema). */
function schemaKeys(schema: z.ZodType, prefix = ''): string[] {
  const def = (schema as unknown as { _zod: { def: { type: string; innerType?: z.ZodType; in?: z.ZodType; shape?: Record<string, z.ZodType> } } })._zod.def
  if (def.innerType !== undefined) return schemaKeys(def.innerType, prefix)
  if (def.type === 'pipe' && def.in !== undefined) return schemaKeys(def.in, prefix)
  if (def.type !== 'object' || def.shape === undefined) return []
  return Object.entries(def.shape).flatMap(([name, child]) => {
    const path = prefix === '' ? name : `${prefix}.${name}`
    return [path, ...schemaKeys(child, path)]
  })
}

/** Every key path set in a plain object. */
function objectKeys(value: unknown, prefix = ''): string[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return []
  return Object.entries(value).flatMap(([name, child]) => {
    const path = prefix === '' ? name : `${prefix}.${name}`
    return [path, ...objectKeys(child, path)]
  })
}

interface DocumentedKey {
  readonly path: string
  readonly type: string
  readonly range: readonly string[]
  readonly presence: string
}

/** The page's keys: a `### \`path\`` heading, a blank line, then `type · range... · presence`. */
function documentedKeys(text: string): DocumentedKey[] {
  return [...text.matchAll(/^### `([^`]+)`\n\n(.+)$/gm)].map((m) => {
    const facts = m[2]!.split(FACTS_SEPARATOR)
    return { path: m[1]!, type: facts[0]!, range: facts.slice(1, -1), presence: facts.at(-1)! }
  })
}

const valueAt = (obj: unknown, path: string): unknown => path.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], obj)
const num = (s: string) => Number(s.replace(/,/g, ''))
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
/** An error that names `path` or a key inside it (an array entry: `key "a.b.0"`). */
const naming = (path: string) => new RegExp(`key "${escape(path)}(\\.[^"]*)?"`)

/** Parses FULL with `path` set to `value` (or removed); the error message, or null when accepted. */
function probe(path: string, ...value: [unknown?]): string | null {
  try {
    parseConfig(withEdit(FULL, path, ...value), '/etc/pxe')
    return null
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    return err.message
  }
}

const documented = documentedKeys(page)

t.test('the committed page is what the generator writes', async (t) => {
  t.equal(page, renderConfigReference(), `${CONFIG_REFERENCE_PATH} is out of date: run npm run config-reference`)
})

t.test('every key the schema accepts is documented once, and nothing else is', async (t) => {
  const keys = schemaKeys(configFileSchema)
  t.ok(keys.includes('ha.etcd.max_txn_ops') && keys.includes('session_handoff.ttl_seconds'), 'the walk reaches nested keys')
  t.same(documented.map((k) => k.path).sort(), [...keys].sort(), 'the page documents exactly the schema keys')
  t.equal(new Set(documented.map((k) => k.path)).size, documented.length, 'no key twice')
  t.same(objectKeys(FULL).sort(), [...keys].sort(), 'this test\'s FULL config sets every key (add a new one to it)')
  t.doesNotThrow(() => parseConfig(FULL, '/etc/pxe'), 'FULL parses')
})

t.test('each documented type is the one the parser enforces', async (t) => {
  const wrongFor: Record<string, unknown> = { integer: 'x', number: 'x', string: 42, path: 42, boolean: 'yes', 'list of strings': 'x', object: 42 }
  for (const key of documented) {
    const base = key.type.replace(/ or null$/, '')
    t.ok(base in wrongFor, `${key.path}: a known type (${key.type})`)
    t.match(probe(key.path, wrongFor[base]) ?? 'accepted', naming(key.path), `${key.path}: a ${typeof wrongFor[base]} is refused as not ${base}`)
    if (key.type.endsWith(' or null')) t.equal(probe(key.path, null), null, `${key.path}: null accepted`)
    else t.match(probe(key.path, null) ?? 'accepted', naming(key.path), `${key.path}: null refused`)
    if (base === 'integer') {
      const low = (valueAt(FULL, key.path) as number) + 0.5
      t.match(probe(key.path, low) ?? 'accepted', naming(key.path), `${key.path}: a fraction refused`)
    }
  }
})

/** A string of length n that keeps the key's shape (a key prefix stays /.../). */
const ofLength = (base: string, n: number) => (base.startsWith('/') ? `/${'a'.repeat(n - 2)}/` : 'a'.repeat(n))

/** Probes for the rules a JSON Schema cannot carry: every rule on the page needs one here. */
const RULE_PROBES: Record<string, { refused: [string, unknown][][]; accepted: [string, unknown][][] }> = {
  controller_id: { refused: [[['controller_id', 'a b']], [['controller_id', 'é']]], accepted: [[['controller_id', '~!x']]] },
  total_shards: { refused: [[['max_concurrency', 16], ['total_shards', 100]]], accepted: [[['max_concurrency', 16], ['total_shards', 96]]] },
  'session_handoff.allowed_hosts': {
    refused: [[['session_handoff.allowed_hosts', ['*']]], [['session_handoff.allowed_hosts', ['*.gg']]], [['session_handoff.allowed_hosts', ['Gateway.discord.gg']]]],
    accepted: [[['session_handoff.allowed_hosts', ['*.example.net', '127.0.0.1', '[::1]', 'gw.example.net']]]],
  },
  'rest.safety': { refused: [[['rest.safety', 0]], [['rest.safety', 1.5]], [['rest.safety', -0.1]]], accepted: [[['rest.safety', 1]], [['rest.safety', 0.5]]] },
  'ops.host': { refused: [[['ops.allow_remote', false], ['ops.host', '0.0.0.0']]], accepted: [[['ops.allow_remote', false], ['ops.host', 'localhost']]] },
  'ops.port': { refused: [[['ops.port', 8443]]], accepted: [[['ops.port', 9100]]] },
  'enroll.port': { refused: [[['enroll.port', 8443]], [['enroll.port', 9464]]], accepted: [[['enroll.port', 9443]]] },
  'ha.etcd.endpoints': {
    refused: [[['ha.etcd.endpoints', ['http://10.0.0.5:2379']]], [['ha.etcd.endpoints', ['https://10.0.0.5:2379/v3']]], [['ha.etcd.endpoints', ['https://10.0.0.5']]]],
    accepted: [[['ha.etcd.endpoints', ['https://etcd-1.pxe.internal:2379']]]],
  },
  'ha.etcd.server_name': { refused: [[['ha.etcd.server_name', '10.0.0.5']]], accepted: [[['ha.etcd.server_name', 'etcd-1.pxe.internal']]] },
}
/** Rules loadConfig enforces on the files themselves, checked below with real files. */
const FILE_MODE_RULE = 'file mode 0600 or stricter'

function probeEdits(edits: [string, unknown][]): string | null {
  let raw: Record<string, unknown> = FULL
  for (const [path, value] of edits) raw = withEdit(raw, path, value)
  try {
    parseConfig(raw, '/etc/pxe')
    return null
  } catch (err) {
    return (err as Error).message
  }
}

t.test('each documented range is the one the parser enforces, at the bound and just past it', async (t) => {
  for (const key of documented) {
    const step = key.type === 'integer' ? 1 : 0.001
    const base = valueAt(FULL, key.path)
    for (const piece of key.range) {
      const at = `${key.path} ${piece}`
      const accepts = (v: unknown, what: string) => t.equal(probe(key.path, v), null, `${at}: ${what} accepted`)
      const refuses = (v: unknown, what: string) => t.match(probe(key.path, v) ?? 'accepted', naming(key.path), `${at}: ${what} refused, naming the key`)
      let m: RegExpExecArray | null
      if ((m = /^(-?[\d,.]+) to ([\d,.]+)$/.exec(piece))) {
        const [min, max] = [num(m[1]!), num(m[2]!)]
        accepts(min, 'the minimum')
        accepts(max, 'the maximum')
        refuses(min - step, 'just below')
        refuses(max + step, 'just above')
      } else if ((m = /^above ([\d,.]+), at most ([\d,.]+)$/.exec(piece))) {
        const [min, max] = [num(m[1]!), num(m[2]!)]
        refuses(min, 'the excluded minimum')
        accepts(min + step, 'just above the minimum')
        accepts(max, 'the maximum')
        refuses(max + step, 'just above')
      } else if (piece === 'non-empty') {
        refuses('', 'an empty string')
        accepts('x', 'one character')
      } else if ((m = /^(?:(\d+) to )?([\d,]+) characters$/.exec(piece)) || (m = /^at most ([\d,]+)() characters$/.exec(piece))) {
        const [min, max] = m[2] === '' ? [0, num(m[1]!)] : [num(m[1] ?? '0'), num(m[2]!)]
        accepts(ofLength(base as string, max), `${max} characters`)
        refuses(ofLength(base as string, max + 1), `${max + 1} characters`)
        if (min > 0) refuses(ofLength(base as string, min - 1), `${min - 1} characters`)
      } else if ((m = /^matches `(.+)`$/.exec(piece))) {
        const pattern = new RegExp(m[1]!)
        t.ok(pattern.test(base as string), `${at}: the pattern admits the working value`)
        t.notOk(pattern.test(`${base as string} x`), `${at}: the pattern refuses a space`)
        refuses(`${base as string} x`, 'a value the pattern refuses')
      } else if ((m = /^(?:([\d,]+) to )?([\d,]+) entries$/.exec(piece)) || (m = /^at most ([\d,]+)() entries$/.exec(piece))) {
        const [min, max] = m[2] === '' ? [0, num(m[1]!)] : [num(m[1] ?? '0'), num(m[2]!)]
        const entry = (base as unknown[])[0]
        accepts(Array(max).fill(entry), `${max} entries`)
        refuses(Array(max + 1).fill(entry), `${max + 1} entries`)
        if (min > 0) refuses(Array(min - 1).fill(entry), `${min - 1} entries`)
        else accepts([], 'no entries')
      } else if ((m = /^one of (.+)$/.exec(piece))) {
        for (const v of m[1]!.split(', ')) accepts(JSON.parse(v.replace(/^`|`$/g, '')), v)
        refuses('not-a-listed-value', 'an unlisted value')
      } else if (piece === FILE_MODE_RULE) {
        t.ok(['tls.key', 'plan_keys', 'ha.etcd.key'].includes(key.path), `${at}: a key file the mode test below covers`)
      } else {
        const probes = RULE_PROBES[key.path]
        t.ok(probes, `${at}: a rule with probes in RULE_PROBES`)
        for (const edits of probes?.refused ?? []) t.match(probeEdits(edits) ?? 'accepted', naming(key.path), `${at}: ${JSON.stringify(edits)} refused`)
        for (const edits of probes?.accepted ?? []) t.equal(probeEdits(edits), null, `${at}: ${JSON.stringify(edits)} accepted`)
      }
    }
  }
})

t.test('each documented default and presence is what the parser does with the key left out', async (t) => {
  const parsed = (raw: Record<string, unknown>) => configFileSchema.parse(raw)
  const documentedDefault = (path: string): unknown => {
    const key = documented.find((k) => k.path === path)!
    const m = /^default `(.+)`$/.exec(key.presence)
    if (m) return JSON.parse(m[1]!)
    if (key.presence === 'default: each key below at its default') {
      const children = documented.filter((k) => k.path.startsWith(`${path}.`) && !k.path.slice(path.length + 1).includes('.'))
      return Object.fromEntries(children.map((c) => [c.path.slice(path.length + 1), documentedDefault(c.path)]))
    }
    return undefined
  }
  for (const key of documented) {
    const without = withEdit(FULL, key.path)
    const p = key.presence
    let m: RegExpExecArray | null
    if (p === 'required' || /^required when `[^`]+` is given$/.test(p)) {
      t.match(probe(key.path) ?? 'accepted', new RegExp(`key "${escape(key.path)}": is required`), `${key.path}: missing is refused as required`)
    } else if ((m = /^required unless `([^`]+)` is set$/.exec(p))) {
      t.equal(probe(key.path), null, `${key.path}: may be left out while ${m[1]} is set`)
      const both = withEdit(without, m[1]!)
      t.throws(() => parseConfig(both, '/etc/pxe'), naming(key.path), `${key.path}: required without ${m[1]}`)
    } else if (p.startsWith('default')) {
      t.same(valueAt(parsed(without), key.path), documentedDefault(key.path), `${key.path}: left out, it takes the documented default`)
    } else if (p.startsWith('optional; absent: ')) {
      t.equal(probe(key.path), null, `${key.path}: may be left out`)
      t.equal(valueAt(parsed(without), key.path), undefined, `${key.path}: left out, the schema gives it no value (its absence means: ${p.slice(18)})`)
    } else {
      t.fail(`${key.path}: a presence the test does not know: ${p}`)
    }
  }
})

t.test('the key files the page marks 0600 are refused by loadConfig when group or others can read them', async (t) => {
  const marked = documented.filter((k) => k.range.includes(FILE_MODE_RULE)).map((k) => k.path)
  t.same(marked.sort(), ['ha.etcd.key', 'plan_keys', 'tls.key'])
  for (const path of marked) await t.test(path, async (t) => {
    const dir = testDir(t, { 'server-key.pem': 'x', 'plan-keys.json': '{}', 'etcd-key.pem': 'x' })
    const files: Record<string, string> = { 'tls.key': 'server-key.pem', plan_keys: 'plan-keys.json', 'ha.etcd.key': 'etcd-key.pem' }
    for (const [k, f] of Object.entries(files)) chmodSync(join(dir, f), k === path ? 0o640 : 0o600)
    let raw = withEdit(FULL, 'tls.key', 'server-key.pem')
    raw = withEdit(raw, 'ha.etcd.key', 'etcd-key.pem')
    writeFileSync(join(dir, 'config.json'), JSON.stringify(raw))
    await t.rejects(loadConfig(join(dir, 'config.json')), new RegExp(`key "${escape(path)}": private key .* accessible by group or others`))
  })
})

t.test('the generator refuses a key without a note, a note without a key, and an unexplained optional key', async (t) => {
  const schema = z.object({ a: z.number().int().min(1).max(2), b: z.string().optional() }).strict()
  t.throws(() => configKeys(schema, { a: { text: 'A.' } }), /key "b" has no note/)
  t.throws(() => configKeys(schema, { a: { text: 'A.' }, b: { text: 'B.' } }), /optional key "b" has no default; say what its absence means/)
  t.throws(() => configKeys(schema, { a: { text: 'A.' }, b: { text: 'B.', absent: 'nothing' }, c: { text: 'C.' } }), /describes keys the schema does not have: c/)
  const keys = configKeys(schema, { a: { text: 'A.' }, b: { text: 'B.', absent: 'nothing' } })
  t.same(keys.map((k) => [k.path, k.type, k.range, k.presence]), [
    ['a', 'integer', ['1 to 2'], 'required'],
    ['b', 'string', [], 'optional; absent: nothing'],
  ])
  t.throws(() => configKeyGroups(keys, [{ title: 'A', intro: '.', keys: ['a'] }]), /top-level keys in no section of notes.ts: b/)
  t.throws(() => configKeyGroups(keys, [{ title: 'A', intro: '.', keys: ['a', 'b', 'z'] }]), /names "z", which the schema does not have/)
})

t.test('deploy/controller.example.json uses only documented keys, and its .md leaves ranges and defaults to the reference', async (t) => {
  const example: unknown = JSON.parse(readFileSync(join(ROOT, 'deploy', 'controller.example.json'), 'utf8'))
  const known = new Set(documented.map((k) => k.path))
  for (const path of objectKeys(example)) t.ok(known.has(path), `${path} is documented`)
  const md = readFileSync(join(ROOT, 'deploy', 'controller.example.md'), 'utf8')
  t.match(md, '](../docs/config-reference.md', 'the annotated example points to the reference')
  // The reference is the one place for ranges and defaults: the annotated example states neither, so it cannot disagree.
  for (const m of md.matchAll(/^.*\bdefaults?\b.*$/gim)) t.fail(`controller.example.md states a default ("${m[0].slice(0, 120)}"): link the reference instead`)
  for (const m of md.matchAll(/\b\d[\d,]*\s*(?:–|\.\.|to)\s*\d[\d,]*\b/g)) t.fail(`controller.example.md states a range ("${m[0]}"): link the reference instead`)
})
