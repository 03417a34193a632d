// The dependency rules of docs/contributing.md "Layout", checked on the source: each room imports only the rooms
// its row allows, so that stores never reach up into the service, the core stays pure, and the
// agent and the toolkit never import controller code.
import t from 'tap'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** Every .ts file under `dir`, recursively. */
function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : []
  })
}

/** The room of a path: `src/<folder>`, a top-level src file, or `pki`. */
function roomOf(path: string): string {
  const rel = relative(ROOT, path).split('/')
  if (rel[0] === 'src') return rel.length > 2 ? `src/${rel[1]}` : `src/${rel[1]}`
  return rel[0]!
}

const ALLOWED: Record<string, readonly string[]> = {
  'src/core': ['src/errors.ts'],
  'src/der': [],
  'src/net': [],
  'src/log': [],
  // What the four bins share about command lines (--version, did-you-mean, closed pipes): node and zod only.
  'src/cli-kit': [],
  'src/identity': ['src/core', 'src/der', 'src/errors.ts'],
  'src/state': ['src/core'],
  'src/ha': ['src/core', 'src/state', 'src/errors.ts', 'src/config.ts'],
  'src/audit': ['src/net'],
  'src/service': ['src/core', 'src/der', 'src/identity', 'src/state', 'src/audit', 'src/errors.ts'],
  // The REST proxy: Node, pino, prom-client and (loaded when a proxy starts) the optional @discordjs/rest.
  'src/rest': ['src/net'],
  'src/agent': ['src/core', 'src/der', 'src/state', 'src/log', 'src/net', 'src/cli-kit', 'src/rest'],
  'src/discordjs': ['src/agent'],
  // The operator CLI speaks only the public HTTP API; core for the name rule and the dry run's planner.
  'src/ctl': ['src/core', 'src/net', 'src/cli-kit'],
  pki: ['src/core', 'src/der', 'src/state', 'src/audit', 'src/cli-kit'],
}

t.test('each room imports only what docs/contributing.md "Layout" allows', async (t) => {
  for (const [room, allowed] of Object.entries(ALLOWED)) {
    const dir = join(ROOT, room)
    const bad: string[] = []
    for (const file of files(dir)) {
      for (const m of readFileSync(file, 'utf8').matchAll(/from '(\.[^']+)'/g)) {
        const target = roomOf(resolve(dirname(file), m[1]!).replace(/\.js$/, '.ts'))
        if (target !== room && !allowed.includes(target)) bad.push(`${relative(ROOT, file)} imports ${m[1]}`)
      }
    }
    t.same(bad, [], `${room} → ${allowed.join(', ') || 'nothing'}`)
  }
})

// @discordjs/ws is a peer dependency of the adapter alone, @discordjs/rest of the REST proxy alone (loaded
// only when one starts): nothing else of the package may need them.
t.test('only src/discordjs and src/rest import @discordjs/* in the product (bench, examples and tests are dev tooling)', async (t) => {
  const bad: string[] = []
  for (const room of ['src', 'pki']) {
    for (const file of files(join(ROOT, room))) {
      if (relative(ROOT, file).startsWith('src/discordjs/') || relative(ROOT, file).startsWith('src/rest/')) continue
      if (/from '@discordjs\//.test(readFileSync(file, 'utf8'))) bad.push(relative(ROOT, file))
    }
  }
  t.same(bad, [])
})
