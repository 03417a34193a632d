// The release artifact: `npm pack` makes one tarball that installs the four bins on a machine with no
// clone, no TypeScript and no registry. It carries the compiled code (dist/src, dist/pki), the bins,
// the deploy/ files and the docs, and the production dependencies bundled at the versions
// package-lock.json pins (npm ignores lock files inside a tarball, so only bundling keeps them); no
// tests, no benchmarks, no source maps, no keys. The second test packs for real and installs into a
// temporary prefix with --offline, as `npm install -g` on a controller host, a CA host or a node image.
import t from 'tap'
import { spawnSync, type SpawnSyncReturns } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { z } from 'zod'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const pkg = z
  .looseObject({
    name: z.string(),
    version: z.string(),
    bin: z.record(z.string(), z.string()),
    exports: z.record(z.string(), z.union([z.string(), z.object({ types: z.string(), default: z.string() }).strict()])),
    dependencies: z.record(z.string(), z.string()),
    scripts: z.record(z.string(), z.string()),
    bundleDependencies: z.literal(true),
  })
  .parse(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')))
const lock = z
  .looseObject({ packages: z.record(z.string(), z.looseObject({ version: z.string().optional(), dev: z.boolean().optional() })) })
  .parse(JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')))
const BUILT = existsSync(join(ROOT, 'dist', 'src', 'main.js'))
// NODE_OPTIONS: tap's loader (tsx) must not reach the bins, which run plain JavaScript.
const ENV = { ...process.env, NODE_OPTIONS: '', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' }

function run(cmd: string, args: string[], cwd: string, timeout = 60_000): SpawnSyncReturns<string> {
  return spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout, env: ENV, maxBuffer: 64 * 1024 * 1024 })
}

const packEntry = z
  .object({ filename: z.string(), size: z.number(), files: z.array(z.object({ path: z.string() }).loose()), bundled: z.array(z.string()) })
  .loose()

/** The production packages of the lock file, by their path (node_modules/a/node_modules/b for a nested one). */
function productionPaths(): Set<string> {
  return new Set(Object.entries(lock.packages).filter(([path, entry]) => path !== '' && entry.dev !== true).map(([path]) => path))
}

const OWN_TOP = /^(dist\/src\/|dist\/pki\/|bin\/|deploy\/|docs\/|README\.md$|SECURITY\.md$|CHANGELOG\.md$|package\.json$)/
// Key material, certificates and bundles by name: none may ever be packed from a developer's tree.
const SECRET = /\.(pem|key|crt|csr|p12|pfx|jwk)$|(^|\/)(plan-keys|plan-jwks|ticket-keys?)\.json$|(^|\/)\.env/

t.test('the file list: compiled code, bins, deploy files and docs; nothing else of ours', { skip: BUILT ? false : 'dist/ is missing: run npm run build' }, async (t) => {
  const res = run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], ROOT)
  t.equal(res.status, 0, `npm pack --dry-run: ${res.stderr}`)
  const [entry] = z.array(packEntry).length(1).parse(JSON.parse(res.stdout))
  t.equal(entry!.filename, `${pkg.name}-${pkg.version}.tgz`)
  const files = entry!.files.map((f) => f.path)
  const own = files.filter((f) => !f.startsWith('node_modules/'))
  const has = new Set(files)

  for (const [name, file] of Object.entries(pkg.bin)) t.ok(has.has(file), `bin ${name}: ${file}`)
  t.ok(has.has('bin/run-built.js'), 'the bins share bin/run-built.js')
  // What the bins import: run-built.js loads dist/<entry> (bin/*.js name them).
  for (const file of readdirSync(join(ROOT, 'bin')).filter((f) => f.startsWith('pxe-'))) {
    const entryFile = /runBuilt\('[^']+', '([^']+)'\)/.exec(readFileSync(join(ROOT, 'bin', file), 'utf8'))?.[1]
    t.ok(entryFile !== undefined && has.has(`dist/${entryFile}`), `bin/${file} runs dist/${entryFile}, which is packed`)
  }
  for (const [path, target] of Object.entries(pkg.exports)) {
    for (const file of typeof target === 'string' ? [target] : [target.types, target.default]) t.ok(has.has(file.replace(/^\.\//, '')), `export ${path}: ${file}`)
  }
  t.ok(has.has('dist/src/ha/lease-keeper-worker.js'), 'the HA lease keeper worker, loaded by file name at run time')
  for (const file of ['deploy/pxe-controller.service', 'deploy/pxe-node.service', 'deploy/Dockerfile', 'deploy/prometheus/prometheus.yml', 'deploy/prometheus/alerts.yml', 'deploy/prometheus/node-alerts.yml', 'deploy/controller.example.json', 'SECURITY.md', 'README.md', 'CHANGELOG.md']) {
    t.ok(has.has(file), file)
  }

  t.same(own.filter((f) => !OWN_TOP.test(f)), [], 'nothing outside dist/src, dist/pki, bin, deploy, docs and the top-level docs')
  t.same(own.filter((f) => f.endsWith('.map')), [], 'no source maps (they point at src/*.ts, which is not packed)')
  t.same(own.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')), [], 'no TypeScript sources')
  t.same(own.filter((f) => /(^|\/)(test|tests|bench|\.tap)\//.test(f) || /\.test\.(js|ts)$/.test(f)), [], 'no tests, no benchmarks')
  t.same(files.filter((f) => SECRET.test(f) && !f.startsWith('node_modules/')), [], 'no keys, certificates or bundles')
  t.notOk(files.includes('dist/.tsbuildinfo'), 'no build cache')

  // Bundled dependencies: exactly the production packages of the lock file, and nothing native, so
  // that one tarball installs on any Linux machine of any architecture Node runs on.
  const production = productionPaths()
  const packedPackages = new Set(files.filter((f) => f.startsWith('node_modules/') && f.endsWith('/package.json')).map((f) => f.slice(0, -'/package.json'.length)))
  t.same([...production].filter((p) => !packedPackages.has(p)), [], 'every production package of package-lock.json is bundled, where the lock puts it')
  const productionNames = new Set([...production].map((p) => p.slice(p.lastIndexOf('node_modules/') + 'node_modules/'.length)))
  t.same(entry!.bundled.filter((name) => !productionNames.has(name)), [], 'nothing else is bundled')
  for (const dep of Object.keys(pkg.dependencies)) t.ok(entry!.bundled.includes(dep), `dependency ${dep} is bundled`)
  for (const dev of ['typescript', 'tap', 'tsx', '@discordjs/ws', '@discordjs/rest']) t.notOk(entry!.bundled.includes(dev), `${dev} (development only, or the optional peer) is not bundled`)
  t.same(files.filter((f) => f.endsWith('.node')), [], 'no native addon')
  t.ok(entry!.size < 20 * 1024 * 1024, `the tarball stays small (${entry!.size} bytes)`)
})

t.test('package.json: the pack builds first; npm publish stays blocked', async (t) => {
  t.equal(pkg.scripts.prepack, 'npm run --silent build', 'npm pack compiles dist/ before it packs')
  t.equal(pkg.scripts.prepare, 'npm run build', 'npm ci in a clone builds too (a tarball install runs neither)')
  t.equal((pkg as { private?: unknown }).private, true, 'the name is not ours on the public registry: the tarball is the release')
})

t.test('the tarball installs offline into an empty prefix and gives four working bins', { skip: BUILT ? false : 'dist/ is missing: run npm run build' }, async (t) => {
  t.setTimeout(240_000)
  // Outside the clone: from a folder inside it, node would find what the install lacks in the clone's
  // own node_modules on its way up.
  const dir = mkdtempSync(join(tmpdir(), 'pxe-package-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  // --ignore-scripts: npm test has just built dist/ (.ci/run packs with the prepack build).
  const pack = run('npm', ['pack', '--ignore-scripts', '--pack-destination', dir, '--silent'], ROOT, 120_000)
  t.equal(pack.status, 0, `npm pack: ${pack.stderr}`)
  const tarball = join(dir, `${pkg.name}-${pkg.version}.tgz`)
  t.ok(existsSync(tarball), tarball)

  const prefix = join(dir, 'prefix')
  // --offline: the registry is never asked; everything comes out of the tarball.
  const install = run('npm', ['install', '--global', '--prefix', prefix, '--offline', '--no-audit', '--no-fund', tarball], dir, 120_000)
  t.equal(install.status, 0, `npm install --global --offline: ${install.stderr}`)
  const installed = join(prefix, 'lib', 'node_modules', pkg.name)
  t.ok(existsSync(join(installed, 'dist', 'src', 'main.js')), 'dist/ installed')
  t.notOk(existsSync(join(installed, 'node_modules', 'typescript')), 'no TypeScript in the install')
  t.notOk(existsSync(join(installed, 'dist', '.tsbuildinfo')), 'nothing was compiled on install (no prepare)')
  t.notOk(existsSync(join(installed, 'node_modules', '@discordjs', 'ws')), 'the optional peer is not installed')
  const fastify = JSON.parse(readFileSync(join(installed, 'node_modules', 'fastify', 'package.json'), 'utf8')) as { version: string }
  t.equal(fastify.version, lock.packages['node_modules/fastify']?.version, 'dependencies at the versions the lock file pins')

  for (const name of Object.keys(pkg.bin)) {
    const bin = join(prefix, 'bin', name)
    const help = run(bin, ['--help'], dir)
    t.equal(help.status, 0, `${name} --help: exit 0 (${help.stderr})`)
    t.match(help.stdout, /usage/i, `${name} --help prints its usage`)
    // --version comes with the CLI conventions; the installed bin must answer as the clone's does.
    const clone = run(process.execPath, [join(ROOT, pkg.bin[name]!), '--version'], dir)
    const version = run(bin, ['--version'], dir)
    if (clone.status === 0) {
      t.equal(version.status, 0, `${name} --version: exit 0 (${version.stderr})`)
      t.equal(version.stdout.trim(), `${name} ${pkg.version}`, `${name} --version prints its version`)
    } else {
      t.equal(version.status, clone.status, `${name} --version: the same answer as the clone (no --version yet)`)
    }
  }

  // The agent library resolves from an application next to the installed package; the discord.js
  // adapter needs its optional peer, which a tarball install leaves out, and says which one.
  const probe = join(prefix, 'lib', 'probe.mjs')
  writeFileSync(
    probe,
    `const a = await import('${pkg.name}/agent')\nconsole.log(typeof a.NodeAgent, typeof a.verifyPlanToken)\n` +
      `await import('${pkg.name}/discordjs').then(() => console.log('adapter loaded'), (err) => console.log(err.code, err.message.includes("package '@discordjs/ws'") || err.message.includes("package @discordjs/ws ")))\n`,
  )
  const lib = run(process.execPath, [probe], dir)
  t.equal(lib.status, 0, `import ${pkg.name}/agent: ${lib.stderr}`)
  t.equal(lib.stdout, 'function function\nERR_MODULE_NOT_FOUND true\n', 'the agent loads; the adapter names its missing peer')
})
