// Steady state stays cheap (issue 11 item 5): a check-in that changes nothing writes nothing to disk,
// logs nothing, audits nothing and does not re-plan — over real mTLS, through the real store.
import t from 'tap'
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { FailingStore } from '../support/failing-store.js'
import { bundle, checkinBody, makePki, request, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const a = await bundle(pki, 'node-a', 'node')
const b = await bundle(pki, 'node-b', 'node')
let logLines = 0
const logger = pino({ level: 'info' }, new Writable({ write: (_c, _e, done) => ((logLines += 1), done()) }))
let store: FailingStore | undefined
const ctl = await startTestController(pki, root, { lease_seconds: 3600 }, { logger, wrapStore: (s) => (store = new FailingStore(s)) })
t.teardown(() => ctl.running.stop())

t.test('repeated check-ins reporting the running generation change nothing anywhere', async (t) => {
  const first = await request(ctl.port, pki.ca, a, '/v1/checkin', { body: checkinBody('node-a') })
  await request(ctl.port, pki.ca, b, '/v1/checkin', { body: checkinBody('node-b') })
  const generation = (await request(ctl.port, pki.ca, a, '/v1/checkin', { body: checkinBody('node-a') })).json.generation
  for (const [id, name] of [[a, 'node-a'], [b, 'node-b']] as const) {
    t.equal((await request(ctl.port, pki.ca, id, '/v1/checkin', { body: checkinBody(name, { generation }) })).status, 200, `${name} reports ${generation}`)
  }
  t.equal(first.status, 200)
  // Those reports are written in the background, one such write a second at most (durable-writer.ts):
  // the steady state starts once the store has been quiet for longer than that.
  for (let last = -1; store!.writes !== last; ) {
    last = store!.writes
    await new Promise((resolve) => setTimeout(resolve, 1500))
  }
  const before = {
    writes: store!.writes,
    journal: statSync(join(root, 'state', 'state.journal')).size,
    audit: readFileSync(join(root, 'audit.log'), 'utf8'),
    logLines,
    replans: ctl.running.service.figures().replans,
  }
  for (let i = 0; i < 20; i++) {
    for (const [id, name] of [[a, 'node-a'], [b, 'node-b']] as const) {
      const r = await request(ctl.port, pki.ca, id, '/v1/checkin', { body: checkinBody(name, { generation, ready_shards: i % 5 }) })
      t.equal(r.json.generation, generation)
    }
  }
  t.equal(store!.writes, before.writes, 'no state write')
  t.equal(statSync(join(root, 'state', 'state.journal')).size, before.journal, 'the journal did not grow')
  t.equal(readFileSync(join(root, 'audit.log'), 'utf8'), before.audit, 'nothing audited')
  t.equal(logLines, before.logLines, 'nothing logged')
  t.equal(ctl.running.service.figures().replans, before.replans, 'no re-plan')
})
