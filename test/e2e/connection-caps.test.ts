// Connection caps before authentication (issue 9 item 7, SPEC "Rate limits"): idle unauthenticated
// sockets from one address cannot use up the descriptors; the excess is dropped at accept time, counted
// and audited at most once a minute per address. Loopback gives us many source hosts: 127.0.0.0/8.
import t from 'tap'
import { mkdirSync, readFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import { spawn } from 'node:child_process'
import { bundle, checkinBody, makePki, request, startTestController, writeTestConfig } from './harness.js'
import { MAIN } from './process.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'node-a', 'node')

/**
 * Opens `count` idle TCP connections from `from`; resolves with the ones the server kept open. The server
 * drops the excess as it accepts them, which on a loaded machine takes a while: it waits until at most
 * `expected` are open (5 s at most), then 200 ms more so that dropping too many would show as well.
 */
async function openIdle(port: number, from: string, count: number, expected: number): Promise<{ kept: Socket[]; dropped: number }> {
  const sockets = await Promise.all(
    Array.from({ length: count }, () => new Promise<Socket>((resolve) => {
      const s = connect({ port, host: '127.0.0.1', localAddress: from })
      s.on('error', () => undefined)
      s.once('connect', () => resolve(s))
      s.once('close', () => resolve(s))
    })),
  )
  const open = () => sockets.filter((s) => !s.destroyed && !s.closed)
  const deadline = performance.now() + 5000
  while (open().length > expected && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50))
  await new Promise((r) => setTimeout(r, 200))
  const kept = open()
  for (const s of sockets) if (!kept.includes(s)) s.destroy()
  return { kept, dropped: count - kept.length }
}

t.test('per address and in total, dropped at accept time, audited once per address', async (t) => {
  const dir = join(root, 'caps')
  mkdirSync(dir)
  const ctl = await startTestController(pki, dir, { max_connections_per_address: 5, max_connections: 8 })
  const a = await openIdle(ctl.port, '127.0.0.1', 12, 5)
  t.equal(a.kept.length, 5, 'five idle sockets from 127.0.0.1 stay open')
  t.equal(a.dropped, 7, 'the other seven are dropped')
  const served = await request(ctl.port, pki.ca, node, '/v1/checkin', { body: checkinBody('node-a'), localAddress: '127.0.0.2' })
  t.equal(served.status, 200, 'a node on another address is served')
  const b = await openIdle(ctl.port, '127.0.0.3', 5, 3)
  t.equal(b.kept.length, 3, 'the total cap (8) leaves room for three more from a third address')
  const refused = await request(ctl.port, pki.ca, node, '/v1/checkin', { body: checkinBody('node-a'), localAddress: '127.0.0.2' }).catch((err: Error) => err)
  t.ok(refused instanceof Error, 'at the total cap even a valid node is dropped')
  t.same({ ...ctl.running.tls.caps.refused }, { max_connections_per_address: 7, max_connections: 3 }, 'refusals counted by reason')
  for (const s of [...a.kept, ...b.kept]) s.destroy()
  await new Promise((r) => setTimeout(r, 200))
  const again = await request(ctl.port, pki.ca, node, '/v1/checkin', { body: checkinBody('node-a'), localAddress: '127.0.0.2' })
  t.equal(again.status, 200, 'served again once the idle sockets are gone')
  await new Promise((r) => setTimeout(r, 200))
  t.equal(ctl.running.tls.caps.trackedSources, 0, 'no address is tracked once its connections closed')
  await ctl.running.stop()
  const lines = readFileSync(join(dir, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  const refusedLines = lines.filter((e) => e.event === 'connection_refused')
  t.same(refusedLines.filter((e) => e.suppressed === undefined).map((e) => [e.peer, e.reason]), [
    ['127.0.0.1', 'max_connections_per_address'],
    ['127.0.0.3', 'max_connections'],
    ['127.0.0.2', 'max_connections'],
  ], 'one line per address')
  t.match(refusedLines.filter((e) => e.suppressed !== undefined), [{ peer: '127.0.0.1', suppressed: 6 }], 'the rest counted in a summary')
})

t.test('the reported lockout: 250 idle sockets against a descriptor limit of 200 (real process)', async (t) => {
  const dir = join(root, 'fd')
  mkdirSync(dir)
  const config = writeTestConfig(pki, dir, {})
  // ulimit -n 200 for the controller only; the default cap of 64 per address keeps it serving.
  const child = spawn('sh', ['-c', 'ulimit -n 200 && exec "$0" "$@"', process.execPath, MAIN, '--config', config], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => void child.kill('SIGKILL'))
  const port = await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString()
      const m = /"port":(\d+),"mode":"[a-z]+","msg":"controller listening/.exec(out)
      if (m) resolve(Number(m[1]))
    })
    child.once('exit', (code) => reject(new Error(`controller exited ${code}: ${out}`)))
  })
  const flood = await openIdle(port, '127.0.0.1', 250, 64)
  t.equal(flood.kept.length, 64, '64 idle sockets kept from the flooding address, the rest dropped')
  const res = await request(port, pki.ca, node, '/v1/checkin', { body: checkinBody('node-a'), localAddress: '127.0.0.9' })
  t.equal(res.status, 200, 'a legitimate node is served during the flood')
  for (const s of flood.kept) s.destroy()
})
