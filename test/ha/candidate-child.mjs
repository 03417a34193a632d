/**
 * A replica in its own process, for the kill -9 and SIGSTOP tests (run by candidate.ts, never by tap).
 * It campaigns and, while it leads, writes `<prefix>writes/<id>/<n>` under its fence every 50 ms. Once
 * it finds that it no longer leads, it tries one more write under the fence it last held, as a stale
 * leader's in-flight write would. Every event goes to stdout as one JSON line with the child's
 * monotonic time. Plain JavaScript on the compiled modules in dist/ (npm test builds them first): a
 * child under the TypeScript loader needs seconds of CPU to start, too much per kill on a loaded CI.
 */
import { performance } from 'node:perf_hooks'
import { connectEtcd } from '../../dist/src/ha/etcd-client.js'
import { fencedWrite } from '../../dist/src/ha/fenced-write.js'
import { Leadership } from '../../dist/src/ha/leader-election.js'

/** @type {{ connection: { endpoints: string[], ca: string, cert: string, key: string }, prefix: string, id: string, ttl: number }} */
const config = JSON.parse(process.argv[2] ?? '')
/** @param {Record<string, unknown>} event */
const say = (event) => process.stdout.write(`${JSON.stringify({ ...event, at: performance.now() })}\n`)

const client = await connectEtcd(config.connection)
const leadership = new Leadership({
  client,
  prefix: config.prefix,
  controllerId: config.id,
  leaseTtlSeconds: config.ttl,
  events: {
    onStartedLeading: (fence) => say({ event: 'started', fence }),
    onStoppedLeading: (reason) => say({ event: 'stopped', reason }),
    onNewLeader: (id) => say({ event: 'leader', id }),
    onError: (err, during) => say({ event: 'error', during, message: err.message }),
  },
})

/** @type {import('../../src/ha/leader-election.js').Fence | null} */
let heldFence = null
let written = 0
let busy = false

/** One step of a leader's work: check leadership (the deadline) first, then write under the fence. */
async function work() {
  const fence = leadership.fence()
  if (fence) {
    heldFence = fence
    const sentAt = performance.now()
    const key = `${config.prefix}writes/${config.id}/${String(++written).padStart(6, '0')}`
    const res = await fencedWrite(client, fence, [{ type: 'put', key, value: config.id }])
    say({ event: 'write', status: res.status, revision: res.revision, sentAt })
  } else if (heldFence) {
    const stale = heldFence
    heldFence = null
    say({ event: 'noticed' })
    const res = await fencedWrite(client, stale, [{ type: 'put', key: `${config.prefix}writes/${config.id}/stale`, value: config.id }])
    say({ event: 'stale_write', status: res.status, revision: res.revision })
  }
}

setInterval(() => {
  if (busy) return
  busy = true
  work()
    .catch((err) => say({ event: 'error', during: 'write', message: err.message }))
    .finally(() => (busy = false))
}, 50)

leadership.start()
say({ event: 'ready', pid: process.pid })
