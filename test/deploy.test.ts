// The shipped example config (deploy/controller.example.json) must parse under the real schema.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ConfigError, parseConfig } from '../src/config.js'

const deployDir = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'deploy')
const raw: unknown = JSON.parse(readFileSync(join(deployDir, 'controller.example.json'), 'utf8'))

t.test('deploy/controller.example.json parses with parseConfig', async (t) => {
  const config = parseConfig(raw, '/etc/pxe-controller', 'controller.example.json')
  t.equal(config.tls.key, '/etc/pxe-controller/server-key.pem', 'relative paths resolve against the config folder')
  t.equal(config.planKeys, '/etc/pxe-controller/plan-keys.json')
  t.equal(config.stateDir, '/var/lib/pxe-controller/state', 'state lives under the unit StateDirectory')
  t.equal(config.auditLog, '/var/log/pxe-controller/audit.log', 'audit log lives under the unit LogsDirectory')
  t.equal(config.listen.port, 8443, 'matches the Dockerfile EXPOSE')
  t.equal(config.settings.identifyIntervalMs, 5100, 'the example keeps the safe Identify interval (exactly 5 s draws INVALID_SESSION)')
})

t.test('every key of the example is documented in controller.example.md', async (t) => {
  const doc = readFileSync(join(deployDir, 'controller.example.md'), 'utf8')
  const keys: string[] = []
  for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
    if (value !== null && typeof value === 'object') keys.push(...Object.keys(value).map((k) => `${key}.${k}`))
    else keys.push(key)
  }
  for (const key of keys) t.match(doc, `\`${key}\``, `${key} is annotated`)
})

t.test('the example is not accepted by accident: an unknown key is still refused', async (t) => {
  t.throws(() => parseConfig({ ...(raw as object), extra: 1 }, '/etc/pxe-controller'), ConfigError)
})
