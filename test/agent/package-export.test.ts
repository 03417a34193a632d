// The package exports the agent as `<package>/agent` (the compiled file, built by `npm test`).
import t from 'tap'
import { readFileSync } from 'node:fs'

t.test('import { NodeAgent } from "<package>/agent" resolves through the exports map', async (t) => {
  const { name } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { name: string }
  const agent = await import(`${name}/agent`)
  t.type(agent.NodeAgent, 'function')
  t.type(agent.loadBundle, 'function')
  t.type(agent.verifyPlanToken, 'function')
  t.same(agent.PLAN_REFUSAL_REASONS.length, 10)
  await t.rejects(import(`${name}/dist/src/runtime.js`), 'server internals are not exported')
})

t.test('import { DiscordjsShards } from "<package>/discordjs" resolves through the exports map', async (t) => {
  const { name, peerDependencies, peerDependenciesMeta } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    name: string
    peerDependencies: Record<string, string>
    peerDependenciesMeta: Record<string, { optional?: boolean }>
  }
  const adapter = await import(`${name}/discordjs`)
  t.type(adapter.DiscordjsShards, 'function')
  t.throws(() => new adapter.DiscordjsShards({ token: '', intents: 0, wsOptions: {}, onDispatch: () => undefined }), /token must be a non-empty string/)
  t.equal(peerDependencies['@discordjs/ws'], '~2.0.4', '@discordjs/ws is a peer dependency')
  t.equal(peerDependenciesMeta['@discordjs/ws']?.optional, true, 'optional: hook-command nodes do not need it')
})
