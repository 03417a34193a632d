/**
 * The config reference page (docs/config-reference.md) as a string: an introduction, the smallest file
 * that starts a controller (checked against the schema here, so it cannot rot), then every key with one
 * fixed facts line (`type · range · default`) that a test reads back and probes against the parser.
 */
import { configFileSchema } from '../config.js'
import { configKeyGroups, type ConfigKey } from './entries.js'

/** Where the page lives in the repository, and the command that writes it. */
export const CONFIG_REFERENCE_PATH = 'docs/config-reference.md'
export const CONFIG_REFERENCE_COMMAND = 'npm run config-reference'

/** The smallest file that starts a controller: every required key, nothing else. */
export const MINIMAL_CONFIG = {
  listen: { host: '0.0.0.0', port: 8443 },
  tls: { ca: 'ca.pem', cert: 'server.pem', key: 'server-key.pem', crl: 'crl.pem' },
  plan_keys: 'plan-keys.json',
  state_dir: '/var/lib/pxe-controller/state',
  audit_log: '/var/log/pxe-controller/audit.log',
  total_shards: 16,
} as const

/** The separator of the facts line; the test splits on it. */
export const FACTS_SEPARATOR = ' · '

function keySection(key: ConfigKey): string {
  return `### \`${key.path}\`\n\n${factsLine(key)}\n\n${key.note.text}\n`
}

/** GitHub's anchor for a heading of plain words: lower case, spaces to hyphens. */
function anchor(title: string): string {
  return title.toLowerCase().replace(/[^a-z0-9 -]/g, '').replace(/ /g, '-')
}

/** The whole page, ending in one newline. */
export function renderConfigReference(): string {
  const minimal = configFileSchema.safeParse(MINIMAL_CONFIG)
  if (!minimal.success) throw new Error(`config reference: the minimal example no longer parses: ${minimal.error.message}`)
  const groups = configKeyGroups()
  const contents = groups.map((g) => {
    const tops = g.keys.filter((k) => !k.path.includes('.')).map((k) => `\`${k.path}\``)
    return `- [${g.title}](#${anchor(g.title)}): ${tops.join(', ')}`
  })
  const parts = [
    `<!-- Generated from the config schema (src/config.ts) and src/config-reference/notes.ts by \`${CONFIG_REFERENCE_COMMAND}\`. Edit those and run it; a test fails while this page differs. -->`,
    '',
    '# Configuration reference',
    '',
    '`pxe-controller --config FILE` reads one JSON file and checks all of it before anything starts: an unknown key, a',
    'missing required key or a value out of range stops the start with a message that names the key',
    '(`key "lease_seconds": ...`). Relative paths are resolved against the folder of the config file. Private key files',
    '(`tls.key`, `plan_keys`, `ha.etcd.key`) must not be readable or writable by group or others.',
    '',
    'Each key below has one line of facts: its type, the values the controller accepts, and its default (or',
    '"required"). Nested keys are written with dots: `ha.etcd.max_txn_ops` is `"max_txn_ops"` inside `"etcd"` inside',
    '`"ha"`. A key given as `null` counts as given, and only `ops` accepts it.',
    '',
    'The smallest file that starts a controller (every other key at its default):',
    '',
    '```json',
    JSON.stringify(MINIMAL_CONFIG, null, 2),
    '```',
    '',
    'An annotated production example: [controller.example.json](../deploy/controller.example.json), explained in',
    '[controller.example.md](../deploy/controller.example.md).',
    '',
    '## Contents',
    '',
    ...contents,
    '',
  ]
  for (const g of groups) {
    parts.push(`## ${g.title}`, '', g.intro, '')
    for (const key of g.keys) parts.push(keySection(key))
  }
  return `${parts.join('\n').trimEnd()}\n`
}

/** The facts line of a key as the page prints it, for tests that read the page back. */
export function factsLine(key: ConfigKey): string {
  return [key.type, ...key.range, key.presence].join(FACTS_SEPARATOR)
}
