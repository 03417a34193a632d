// deploy/pxe-node.service and deploy/pxe-controller.service: the node unit is sandboxed exactly like the
// controller's, its command line (as systemd expands it with the example environment file its comments
// give) is one pxe-node accepts, its restart policy spares the exit statuses a restart cannot mend, and
// its stop time fits a graceful stop. With systemd-analyze on the machine, both units pass `verify`.
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { AGENT_DEFAULTS } from '../../src/agent/agent-options.js'
import { parseCliArgs } from '../../src/agent/cli-args.js'
import { EXIT } from '../../src/agent/cli-main.js'
import { testDir } from '../support/test-dir.js'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
const read = (file: string) => readFileSync(join(ROOT, 'deploy', file), 'utf8')
const bins = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin

type Unit = Map<string, string[]>

/** The directives of a unit file as `Section.Key` → values in order (a key may repeat). */
function parseUnit(text: string): Unit {
  const unit: Unit = new Map()
  let section = ''
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue
    const header = /^\[(\w+)\]$/.exec(line)
    if (header) {
      section = header[1]!
      continue
    }
    const eq = line.indexOf('=')
    if (eq < 1 || section === '') throw new Error(`not a unit directive: ${line}`)
    const key = `${section}.${line.slice(0, eq)}`
    unit.set(key, [...(unit.get(key) ?? []), line.slice(eq + 1)])
  }
  return unit
}

const one = (unit: Unit, key: string): string => {
  const values = unit.get(key) ?? []
  if (values.length !== 1) throw new Error(`${key}: ${values.length} values`)
  return values[0]!
}

/** systemd's ExecStart expansion: `${VAR}` is one word as it stands, a lone `$VAR` splits at whitespace. */
function expandExec(line: string, env: Record<string, string>): string[] {
  const words: string[] = []
  for (const word of line.split(/\s+/)) {
    const lone = /^\$(\w+)$/.exec(word)
    if (lone) {
      words.push(...(env[lone[1]!] ?? '').split(/\s+/).filter((w) => w !== ''))
      continue
    }
    words.push(word.replace(/\$\{(\w+)\}/g, (_, name: string) => env[name] ?? ''))
  }
  return words
}

const controller = parseUnit(read('pxe-controller.service'))
const nodeText = read('pxe-node.service')
const node = parseUnit(nodeText)

// Every sandboxing and privilege directive of the controller's unit.
const HARDENING = /^Service\.(User|Group|UMask|NoNewPrivileges|SecureBits|CapabilityBoundingSet|AmbientCapabilities|Protect\w+|Private\w+|Restrict\w+|RemoveIPC|LockPersonality|MemoryDenyWriteExecute|SystemCall\w+|LimitNOFILE)$/

t.test('pxe-node.service is hardened like the controller unit', async (t) => {
  const keys = [...controller.keys()].filter((k) => HARDENING.test(k))
  t.ok(keys.length >= 25, `${keys.length} hardening directives compared`)
  for (const key of keys) {
    if (key === 'Service.User' || key === 'Service.Group') t.same(node.get(key), ['pxe-node'], `${key}: its own system user`)
    else t.same(node.get(key), controller.get(key), key)
  }
  t.equal(one(node, 'Service.ProtectSystem'), 'strict')
  t.equal(one(node, 'Service.StateDirectory'), 'pxe-node')
  t.same(node.get('Service.ReadWritePaths'), ['/var/lib/pxe-node'], 'writes only its state folder')
})

t.test('the restart policy spares what a restart cannot mend, and the stop fits a graceful stop', async (t) => {
  t.equal(one(node, 'Service.Restart'), 'on-failure')
  const prevent = one(node, 'Service.RestartPreventExitStatus').split(/\s+/).map(Number)
  t.ok(prevent.includes(EXIT.refused), `exit ${EXIT.refused} (certificate refused) is never restarted in a loop`)
  t.same(prevent.sort(), [EXIT.usage, EXIT.refused, EXIT.stopTimeout].sort(), 'bad command line, refused certificate, stop timeout: left for an operator')
  t.notOk(prevent.includes(EXIT.startup), 'an unusable bundle at boot may come right: restarted')
  t.equal(one(node, 'Service.KillMode'), 'mixed', 'SIGTERM to the agent alone: it stops its shards itself')
  const stopSec = Number(one(node, 'Service.TimeoutStopSec'))
  t.ok(stopSec * 1000 >= AGENT_DEFAULTS.maxStopTimeoutMs + 10_000, `TimeoutStopSec ${stopSec} s covers the longest default stop timeout (${AGENT_DEFAULTS.maxStopTimeoutMs} ms) with a margin`)
  t.ok(Number(one(controller, 'Service.TimeoutStopSec')) > 0)
})

t.test('ExecStart with the documented environment file is a command line pxe-node accepts', async (t) => {
  const example = /# \/etc\/pxe-node\/pxe-node\.env, for example[^\n]*\n((?:#   \w+=[^\n]*\n)+)/.exec(nodeText)
  t.ok(example, 'the comments give an example environment file')
  const env = Object.fromEntries(example![1]!.split('\n').filter(Boolean).map((l) => l.replace(/^#\s+/, '')).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]))
  t.same(Object.keys(env).sort(), ['PXE_NODE_BUNDLE', 'PXE_NODE_CONTROLLERS', 'PXE_NODE_OPTIONS'])
  t.same(node.get('Service.EnvironmentFile'), ['/etc/pxe-node/pxe-node.env'], 'required: no "-" prefix')
  const [bin, ...argv] = expandExec(one(node, 'Service.ExecStart'), env)
  t.equal(bin, 'pxe-node', 'the bin, looked up by systemd where npm install -g puts it')
  t.ok(bins['pxe-node'], 'a bin of the package')
  const args = parseCliArgs(argv)
  t.equal(args.bundle, '/etc/pxe-node/bundle')
  t.same(args.controllers, ['https://10.0.0.5:8443', 'https://10.0.0.6:8443'])
  t.equal(args.stateFile, '/var/lib/pxe-node/state.json', 'the state file is in the StateDirectory')
  t.equal(args.onStart, '/etc/pxe-node/on-start')
  t.equal(args.onStop, '/etc/pxe-node/on-stop')
  t.same(args.metrics, { host: '0.0.0.0', port: 9465 }, 'the port the Prometheus job scrapes')
  t.equal(args.capacity, 16)
  for (const hook of [args.onStart, args.onStop]) t.ok(node.get('Unit.AssertFileIsExecutable')?.includes(hook!), `${hook} is asserted before the start`)
  // Without the optional flags the line still parses (a lone $VAR that is empty yields no argument).
  t.doesNotThrow(() => parseCliArgs(expandExec(one(node, 'Service.ExecStart'), { ...env, PXE_NODE_OPTIONS: '' }).slice(1)))
  // A missing required variable is a usage error (exit 2), which the unit does not restart.
  t.throws(() => parseCliArgs(expandExec(one(node, 'Service.ExecStart'), { ...env, PXE_NODE_CONTROLLERS: '' }).slice(1)))
})

t.test('pxe-controller.service runs the installed bin', async (t) => {
  const [bin, ...argv] = one(controller, 'Service.ExecStart').split(/\s+/)
  t.equal(bin, 'pxe-controller')
  t.ok(bins['pxe-controller'], 'a bin of the package')
  t.same(argv, ['--config', '/etc/pxe-controller/controller.json'])
  t.notMatch(read('pxe-controller.service'), /\/opt\/pxe-controller/, 'no path of a clone in /opt')
})

const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' })
t.test('systemd-analyze verify accepts both units', { skip: analyze.status === 0 ? false : 'systemd-analyze is not installed' }, async (t) => {
  const dir = testDir(t, {})
  for (const file of ['pxe-controller.service', 'pxe-node.service']) {
    // verify checks that the command exists; the bin is not installed here, so node stands in for it.
    const text = read(file).replace(/^ExecStart=pxe-[a-z]+/m, `ExecStart=${process.execPath}`)
    writeFileSync(join(dir, file), text)
    const res = spawnSync('systemd-analyze', ['verify', join(dir, file)], { encoding: 'utf8', timeout: 30_000 })
    t.equal(res.status, 0, `${file}: ${res.stderr}`)
    t.equal(res.stderr.trim(), '', `${file}: no warning`)
  }
})
