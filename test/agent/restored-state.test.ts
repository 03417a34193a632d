// A controller restarted on an older copy of its state_dir (docs/backup-and-restore.md "Restoring an older state_dir"):
// nodes that ran a newer generation are locked out (their reports are refused with 400 and a message
// that names the cause), they stop every shard within one lease, and the documented recovery —
// restart each agent without its stored generation — brings them back with no guild served twice.
import t from 'tap'
import { cpSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { FileGenerationStore } from '../../src/agent/generation-store.js'
import type { NodeAgent } from '../../src/agent/node-agent.js'
import { makePki } from '../e2e/harness.js'
import { Recorder, controllerIn, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const [idA, idB] = await nodeIdentities(pki, ['node-a', 'node-b'])
const settings = { total_shards: 8, max_concurrency: 8, lease_seconds: 6, identify_interval_ms: 5000 }

t.test('an older state_dir locks the newer nodes out; restarting their agents without --state-file recovers', async (t) => {
  const dir = join(root, 'ctl')
  const c1 = await controllerIn(pki, dir, settings)
  const port = c1.port
  const rec = new Recorder()
  const stores = { a: join(root, 'a-state.json'), b: join(root, 'b-state.json') }
  const agents: NodeAgent[] = []
  const agent = (id: typeof idA, store: string) => {
    const made = recordingAgent(rec, id, [urlOf(port)], { capacity: 8, generationStore: new FileGenerationStore(store, id.nodeId) })
    agents.push(made)
    return made
  }
  t.teardown(() => Promise.all(agents.map((x) => x.stop())))
  const a = agent(idA, stores.a)
  await a.start()
  await until('node-a runs every shard', () => rec.running('node-a').length === 8, 20_000)
  await c1.running.stop()
  cpSync(join(dir, 'state'), join(root, 'backup'), { recursive: true }) // the backup, at generation 1
  const c2 = await controllerIn(pki, dir, { ...settings, listen: { host: '127.0.0.1', port } })
  const b = agent(idB, stores.b)
  await b.start()
  await until('node-b joined and both run their half', () => rec.running('node-a').length === 4 && rec.running('node-b').length === 4, 30_000)
  const applied = a.status().reportedGeneration!
  t.ok(applied >= 2, `the nodes applied generation ${applied}`)

  await c2.running.stop()
  rmSync(join(dir, 'state'), { recursive: true })
  cpSync(join(root, 'backup'), join(dir, 'state'), { recursive: true })
  const c3 = await controllerIn(pki, dir, { ...settings, listen: { host: '127.0.0.1', port } })
  t.teardown(() => c3.running.stop())
  const refusedAt = performance.now()
  await until('both nodes stopped every shard', () => rec.running('node-a').length === 0 && rec.running('node-b').length === 0, 20_000)
  // An attempt of the restart window can be recorded after c3's start resolved (its error callback ran
  // later on a loaded machine: a refused connection, or a reset from c2's shutdown): the first failure
  // that is an answer must be the restored controller's refusal.
  const failures = rec.events('node-a', 'checkin_failed').filter((e) => e.at > refusedAt).map((e) => e.event.detail)
  const answered = failures.filter((detail) => /answered \d{3} /.test(detail))
  t.match(answered[0], /answered 400 invalid_request: generation \d+ is above the controller's current generation 1: this node ran a plan this controller does not know \(state_dir restored from an older copy, or lost\?\)/, 'the refusal names the likely cause')
  t.ok(rec.events('node-a', 'authority_lost').length > 0, 'node-a lost its authority and stopped')
  await new Promise((r) => setTimeout(r, 2000))
  t.equal(a.status().state, 'no_authority', 'and stays locked out: waiting does not help')

  // The recovery: stop each agent, delete its stored generation, start it again.
  await Promise.all([a.stop(), b.stop()])
  rmSync(stores.a)
  rmSync(stores.b)
  const recoveredAt = performance.now()
  const a2 = agent(idA, stores.a)
  const b2 = agent(idB, stores.b)
  await a2.start()
  await b2.start()
  await until('both run their half again', () => a2.status().running.length === 4 && b2.status().running.length === 4, 30_000)
  t.ok(rec.events('node-a', 'plan_accepted').some((e) => e.at > recoveredAt), 'node-a accepts plans again')
  t.same(rec.guildOverlaps(), [], 'no guild was served by two sessions at any moment, the lock-out and the recovery included')
})
