/**
 * Every key of the controller's config file, read from the zod schema through its JSON Schema
 * (`z.toJSONSchema`, input side: what a file may hold): type, range, default, whether required. The prose
 * comes from notes.ts; a key without a note, a note without a key, or an optional key whose absence the
 * page could not explain stops the generator, so the page can never silently miss a key.
 */
import { z } from 'zod'
import { configFileSchema } from '../config.js'
import { KEY_GROUPS, KEY_NOTES, type KeyGroup, type KeyNote } from './notes.js'

/** The parts of a JSON Schema node that zod emits for this config. */
interface JsonSchemaNode {
  readonly type?: string
  readonly properties?: Readonly<Record<string, JsonSchemaNode>>
  readonly required?: readonly string[]
  readonly anyOf?: readonly JsonSchemaNode[]
  readonly items?: JsonSchemaNode
  readonly enum?: readonly unknown[]
  readonly default?: unknown
  readonly minimum?: number
  readonly maximum?: number
  readonly exclusiveMinimum?: number
  readonly exclusiveMaximum?: number
  readonly minLength?: number
  readonly maxLength?: number
  readonly pattern?: string
  readonly minItems?: number
  readonly maxItems?: number
}

/** One documented key, its facts rendered as the page prints them. */
export interface ConfigKey {
  /** Dotted path, e.g. `ha.etcd.max_txn_ops`. */
  readonly path: string
  /** `integer`, `path`, `list of strings`, `object or null`, ... */
  readonly type: string
  /** The range pieces: bounds, allowed values, and the code's further rules. */
  readonly range: readonly string[]
  /** `required`, `required when \`ha\` is given`, `default \`30\``, `optional; absent: ...`. */
  readonly presence: string
  readonly note: KeyNote
}

/** A section of the page with its keys in order. */
export interface ConfigKeyGroup {
  readonly title: string
  readonly intro: string
  readonly keys: readonly ConfigKey[]
}

/** Thousands separated by commas, so that 1000000 reads as 1,000,000. */
export function formatNumber(n: number): string {
  const [whole = '', fraction] = String(n).split('.')
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',')
  return fraction === undefined ? grouped : `${grouped}.${fraction}`
}

/** JSON on one line with a space after each colon and comma, as the page quotes defaults. */
export function compactJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(compactJson).join(', ')}]`
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${compactJson(v)}`).join(', ')}}`
  }
  return JSON.stringify(value)
}

/** The object branch of a node (`object`, or `object` in an `anyOf` with `null`), if any. */
function objectOf(node: JsonSchemaNode): JsonSchemaNode | undefined {
  if (node.type === 'object') return node
  return node.anyOf?.find((n) => n.type === 'object')
}

function typeOf(node: JsonSchemaNode, note: KeyNote): string {
  const nullable = node.anyOf?.some((n) => n.type === 'null') ?? false
  const base = node.anyOf?.find((n) => n.type !== 'null') ?? node
  let type = base.type ?? 'any'
  if (type === 'array') type = `list of ${base.items?.type ?? 'any'}s`
  if (note.path) {
    if (type !== 'string') throw new Error(`config reference: key marked as a path is a ${type}, not a string`)
    type = 'path'
  }
  return nullable ? `${type} or null` : type
}

function rangeOf(node: JsonSchemaNode, note: KeyNote): string[] {
  const n = node.anyOf?.find((b) => b.type !== 'null') ?? node
  const range: string[] = []
  const f = formatNumber
  if (n.exclusiveMinimum !== undefined || n.exclusiveMaximum !== undefined) {
    const low = n.exclusiveMinimum !== undefined ? `above ${f(n.exclusiveMinimum)}` : n.minimum !== undefined ? `at least ${f(n.minimum)}` : ''
    const high = n.exclusiveMaximum !== undefined ? `below ${f(n.exclusiveMaximum)}` : n.maximum !== undefined ? `at most ${f(n.maximum)}` : ''
    range.push([low, high].filter(Boolean).join(', '))
  } else if (n.minimum !== undefined && n.maximum !== undefined) range.push(`${f(n.minimum)} to ${f(n.maximum)}`)
  else if (n.minimum !== undefined) range.push(`at least ${f(n.minimum)}`)
  else if (n.maximum !== undefined) range.push(`at most ${f(n.maximum)}`)
  if (n.minLength === 1 && n.maxLength === undefined) range.push('non-empty')
  else if (n.minLength !== undefined && n.maxLength !== undefined) range.push(`${f(n.minLength)} to ${f(n.maxLength)} characters`)
  else if (n.maxLength !== undefined) range.push(`at most ${f(n.maxLength)} characters`)
  else if (n.minLength !== undefined) range.push(`at least ${f(n.minLength)} characters`)
  if (n.pattern !== undefined) range.push(`matches \`${n.pattern}\``)
  if (n.minItems !== undefined && n.maxItems !== undefined) range.push(`${f(n.minItems)} to ${f(n.maxItems)} entries`)
  else if (n.maxItems !== undefined) range.push(`at most ${f(n.maxItems)} entries`)
  else if (n.minItems !== undefined) range.push(`at least ${f(n.minItems)} entries`)
  if (n.enum !== undefined) range.push(`one of ${n.enum.map((v) => `\`${JSON.stringify(v)}\``).join(', ')}`)
  if (note.rule !== undefined) range.push(note.rule)
  return range
}

/** The default an object takes when each of its keys takes its own, or undefined when a key has none. */
function composedDefault(node: JsonSchemaNode): unknown {
  const obj = objectOf(node)
  if (obj?.properties === undefined) return node.default
  const out: Record<string, unknown> = {}
  for (const [key, child] of Object.entries(obj.properties)) {
    const value = composedDefault(child)
    if (value === undefined) return undefined
    out[key] = value
  }
  return out
}

function presenceOf(path: string, node: JsonSchemaNode, required: boolean, optionalAncestor: string | null, note: KeyNote): string {
  if (note.required !== undefined) return note.required
  if (required) return optionalAncestor === null ? 'required' : `required when \`${optionalAncestor}\` is given`
  if (node.default !== undefined) {
    const composed = objectOf(node) === undefined ? undefined : composedDefault(node)
    if (composed !== undefined && compactJson(composed) === compactJson(node.default)) return 'default: each key below at its default'
    return `default \`${compactJson(node.default)}\``
  }
  if (note.absent === undefined) throw new Error(`config reference: optional key "${path}" has no default; say what its absence means ("absent") in notes.ts`)
  return `optional; absent: ${note.absent}`
}

/** Every key of the config file (or of `schema`, with `notes`) in schema order, depth first. */
export function configKeys(schema: z.ZodType = configFileSchema, notes: Readonly<Record<string, KeyNote>> = KEY_NOTES): ConfigKey[] {
  const root = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'throw' }) as JsonSchemaNode
  const keys: ConfigKey[] = []
  const walk = (node: JsonSchemaNode, prefix: string, optionalAncestor: string | null) => {
    const obj = objectOf(node)
    for (const [name, child] of Object.entries(obj?.properties ?? {})) {
      const path = prefix === '' ? name : `${prefix}.${name}`
      const note = notes[path]
      if (note === undefined) throw new Error(`config reference: key "${path}" has no note in src/config-reference/notes.ts`)
      const required = (obj?.required ?? []).includes(name)
      keys.push({ path, type: typeOf(child, note), range: rangeOf(child, note), presence: presenceOf(path, child, required, optionalAncestor, note), note })
      // the nearest optional ancestor is the one whose presence makes a required key necessary
      walk(child, path, required || note.required !== undefined ? optionalAncestor : path)
    }
  }
  walk(root, '', null)
  const stale = Object.keys(notes).filter((path) => !keys.some((k) => k.path === path))
  if (stale.length > 0) throw new Error(`config reference: notes.ts describes keys the schema does not have: ${stale.join(', ')}`)
  return keys
}

/** The keys in the page's sections; a top-level key in no section stops the generator. */
export function configKeyGroups(keys: readonly ConfigKey[] = configKeys(), groups: readonly KeyGroup[] = KEY_GROUPS): ConfigKeyGroup[] {
  const topOf = (path: string) => path.split('.')[0]!
  const orphans = [...new Set(keys.map((k) => topOf(k.path)))].filter((top) => !groups.some((g) => g.keys.includes(top)))
  if (orphans.length > 0) throw new Error(`config reference: top-level keys in no section of notes.ts: ${orphans.join(', ')}`)
  return groups.map((g) => ({
    title: g.title,
    intro: g.intro,
    keys: g.keys.flatMap((top) => {
      const own = keys.filter((k) => topOf(k.path) === top)
      if (own.length === 0) throw new Error(`config reference: section "${g.title}" names "${top}", which the schema does not have`)
      return own
    }),
  }))
}
