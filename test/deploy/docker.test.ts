// deploy/Dockerfile: the image is built from the same tarball as every other install, publishes both
// listeners, and ships an example config (deploy/controller.container.json) that makes the ops endpoint
// reachable on purpose. Docker itself is not needed: the file's instructions are checked against the
// clone and the config schema.
import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseConfig } from '../../src/config.js'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
const dockerfile = readFileSync(join(ROOT, 'deploy', 'Dockerfile'), 'utf8')
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; bin: Record<string, string> }

/** The instructions of one stage, as [instruction, arguments] (continuation lines joined). */
function stage(name: string): [string, string][] {
  const lines = dockerfile.replace(/\\\n\s*/g, ' ').split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#'))
  const start = lines.findIndex((l) => new RegExp(`^FROM \\S+ AS ${name}$`).test(l))
  if (start < 0) throw new Error(`no stage ${name}`)
  const out: [string, string][] = []
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith('FROM ')) break
    const space = line.indexOf(' ')
    out.push([line.slice(0, space), line.slice(space + 1)])
  }
  return out
}

const raw = JSON.parse(readFileSync(join(ROOT, 'deploy', 'controller.container.json'), 'utf8')) as Record<string, unknown>
const config = parseConfig(raw, '/etc/pxe-controller', 'controller.container.json')

t.test('the build stage packs the tarball from everything the pack and the compile read', async (t) => {
  const build = stage('build')
  const copies = build.filter(([i, a]) => i === 'COPY' && !a.startsWith('--from')).flatMap(([, a]) => a.split(/\s+/).slice(0, -1))
  for (const source of copies) t.ok(existsSync(join(ROOT, source)), `COPY ${source}: in the clone`)
  const tsBuild = JSON.parse(readFileSync(join(ROOT, 'tsconfig.build.json'), 'utf8')) as { include: string[] }
  for (const dir of tsBuild.include) t.ok(copies.includes(dir), `${dir} (compiled by tsconfig.build.json) is copied`)
  const files = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] }).files
  for (const entry of files.filter((f) => !f.startsWith('!') && !f.startsWith('dist/'))) {
    t.ok(copies.includes(entry.replace(/\/$/, '')), `${entry} (in the package) is copied`)
  }
  t.ok(build.some(([i, a]) => i === 'RUN' && /^npm ci --ignore-scripts$/.test(a)), 'locked dependencies')
  t.ok(build.some(([i, a]) => i === 'RUN' && /^npm pack\b/.test(a)), 'npm pack (its prepack builds)')
})

t.test('the runtime stage installs the tarball, offline, and runs the bin', async (t) => {
  const runtime = stage('runtime')
  const install = runtime.find(([i, a]) => i === 'RUN' && a.startsWith('npm install --global'))
  t.ok(install, 'npm install --global of the tarball')
  t.match(install![1], new RegExp(`--offline .*${pkg.name}-\\*\\.tgz`), 'offline: everything is bundled in the tarball')
  t.same(runtime.filter(([i]) => i === 'ENTRYPOINT').map(([, a]) => JSON.parse(a)), [['pxe-controller']])
  t.ok(pkg.bin['pxe-controller'])
  t.same(runtime.filter(([i]) => i === 'USER').map(([, a]) => a), ['node'], 'not root')
  t.notOk(runtime.some(([i, a]) => i === 'COPY' && /\.pem|key/.test(a)), 'no key is copied into the image')
})

t.test('both listeners are published, and the example config makes ops reachable on purpose', async (t) => {
  const exposed = stage('runtime').filter(([i]) => i === 'EXPOSE').flatMap(([, a]) => a.split(/\s+/).map(Number))
  t.same(exposed.sort(), [config.listen.port, config.ops!.port].sort(), 'EXPOSE: the mTLS API and the ops endpoint of the example')
  t.equal(config.listen.port, 8443)
  t.same(config.ops, { host: '0.0.0.0', port: 9464, allowRemote: true }, 'ops on every interface of the container, asked for explicitly')
  t.throws(() => parseConfig({ ...raw, ops: { host: '0.0.0.0', port: 9464 } }, '/etc/pxe-controller'), /allow_remote/, 'without allow_remote the schema refuses it')
  t.match(dockerfile, /-p 127\.0\.0\.1:9464:9464/, 'the run line publishes ops on the host loopback only')
  t.match(dockerfile, /no authentication/, 'the comment says what the port exposes')
  // State and audit log on the state volume; keys and config read from the read-only one.
  t.match(dockerfile, /VOLUME \["\/etc\/pxe-controller", "\/var\/lib\/pxe-controller"\]/)
  t.ok(config.stateDir!.startsWith('/var/lib/pxe-controller/'), 'state_dir on the state volume')
  t.ok(config.auditLog.startsWith('/var/lib/pxe-controller/'), 'audit_log on the state volume (the root file system is read-only)')
  t.equal(config.tls.key, '/etc/pxe-controller/server-key.pem')
  // Apart from where it writes and listens, the container example is the host example.
  const host = JSON.parse(readFileSync(join(ROOT, 'deploy', 'controller.example.json'), 'utf8')) as Record<string, unknown>
  const differing = Object.keys({ ...host, ...raw }).filter((k) => JSON.stringify(host[k]) !== JSON.stringify(raw[k]))
  t.same(differing.sort(), ['audit_log', 'ops'])
})

t.test('the build context leaves the clone\'s dependencies, build output and keys out', async (t) => {
  const ignore = readFileSync(join(ROOT, 'deploy', 'Dockerfile.dockerignore'), 'utf8').split('\n').filter((l) => l !== '' && !l.startsWith('#'))
  for (const entry of ['node_modules', 'dist', '.git', '**/*.pem']) t.ok(ignore.includes(entry), entry)
})
