// Floods that used to fill the disk (issue 9 items 5 and 6): a valid node certificate speaking for another
// node or claiming shards it does not own, and refused handshakes. Each kind is written at most 5 times a
// minute per source (certificate serial, or peer address) to the audit log AND to the operational log,
// then counted in one summary line.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { bundle, checkinBody, makePki, request, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const mallory = await bundle(pki, 'node-m', 'node')
const honest = await bundle(pki, 'node-h', 'node')
const logLines: Array<Record<string, unknown>> = []
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const line of chunk.toString().split('\n')) if (line) logLines.push(JSON.parse(line) as Record<string, unknown>)
    done()
  },
})
const logger = pino({ level: 'info' }, sink)
const ctl = await startTestController(pki, root, { lease_seconds: 3600 }, { logger })

t.test('floods from a valid certificate and from a peer without one', async (t) => {
  t.equal((await request(ctl.port, pki.ca, mallory, '/v1/checkin', { body: checkinBody('node-m') })).status, 200)
  t.equal((await request(ctl.port, pki.ca, honest, '/v1/checkin', { body: checkinBody('node-h') })).status, 200)
  const ownedByHonest = (await request(ctl.port, pki.ca, honest, '/v1/checkin', { body: checkinBody('node-h') })).json.range_start
  for (let i = 0; i < 40; i++) {
    t.equal((await request(ctl.port, pki.ca, mallory, '/v1/checkin', { body: checkinBody('node-h') })).status, 403)
    t.equal((await request(ctl.port, pki.ca, mallory, '/v1/identify', { body: { node_id: 'node-m', shard_id: ownedByHonest } })).status, 403)
    t.equal(await request(ctl.port, pki.ca, null, '/v1/keys').then(() => 'served', () => 'refused'), 'refused')
  }
  // The honest node's refusals are its own: not held back by mallory's flood.
  t.equal((await request(ctl.port, pki.ca, honest, '/v1/checkin', { body: checkinBody('node-m') })).status, 403)
  await ctl.running.stop()

  const audit = readFileSync(join(root, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  for (const event of ['identity_mismatch', 'not_owner', 'tls_rejected']) {
    const lines = audit.filter((e) => e.event === event)
    const detailed = lines.filter((e) => e.suppressed === undefined)
    const summaries = lines.filter((e) => e.suppressed !== undefined)
    const key = event === 'tls_rejected' ? 'peer' : 'serial'
    const flooder = event === 'tls_rejected' ? '127.0.0.1' : mallory.serial
    t.equal(detailed.filter((e) => e[key] === flooder).length, 5, `${event}: five detailed audit lines from the flooder`)
    t.match(summaries, [{ [key]: flooder, suppressed: 35 }], `${event}: one summary counting the other 35`)
    const logged = logLines.filter((l) => l.msg === `refused: ${event}` && l[key] === flooder)
    t.equal(logged.length, 6, `${event}: the operational log has the same five lines and the summary`)
  }
  t.equal(audit.filter((e) => e.event === 'identity_mismatch' && e.serial === honest.serial).length, 1, 'the honest node is audited on its own')
})
