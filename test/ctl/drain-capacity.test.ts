// pxe-ctl drain and the capacity of the other nodes (SPEC "Operator endpoints": a drain after which more
// shards would have no node is refused unless forced, and pxe-ctl says so before it asks the controller).
// Against a real controller: the refusal sends nothing (the controller's own request counter for the
// drain route does not move), --dry-run says how many shards would be left without a node, --force
// drains and says how many are; a plan that changed after pxe-ctl read it gets the controller's 409
// (a front that serves the plan as pxe-ctl read it and passes the drain on to the real controller);
// and an older controller (no "force", no "unassigned") still gets its drain.
import t, { type Test } from 'tap'
import https from 'node:https'
import { readFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { runCtl, startFleet, until, writeContext, type Fleet } from './support.js'

/** Check-ins of every node, then again reporting the generation they were given (no handoff stays pending). */
async function checkInAll(fleet: Fleet, caps: Record<string, number>): Promise<void> {
  for (const [name, capacity] of Object.entries(caps)) await fleet.checkIn(name, { capacity })
  const generation = (await fleet.plan()).generation
  for (const [name, capacity] of Object.entries(caps)) await fleet.checkIn(name, { capacity, generation })
}

/** Drain requests the controller answered so far (any status), from its own metrics. */
async function drainRequests(fleet: Fleet): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${fleet.controller.opsPort}/metrics`)).text()
  let sum = 0
  for (const line of text.split('\n')) if (line.startsWith('pxe_requests_total{') && line.includes('route="/v1/nodes/:node_id/drain"')) sum += Number(line.split(' ').at(-1))
  return sum
}

const auditLines = (fleet: Fleet, event: string): Record<string, unknown>[] =>
  readFileSync(join(fleet.root, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.event === event)

const nodeOf = (plan: any, id: string) => plan.nodes.find((n: any) => n.node_id === id)

t.test('a drain that would strand shards: refused before asking, --dry-run says how many, --force drains', async (t) => {
  const fleet = await startFleet(t, { total_shards: 64, max_concurrency: 16 })
  await checkInAll(fleet, { a: 40, b: 24, c: 16 })
  const start = await fleet.plan()
  t.equal(start.unassigned, 0, 'setup: every shard has a node')
  const sentBefore = await drainRequests(fleet)

  const refused = await fleet.ctl('drain', 'b')
  t.equal(refused.code, 1, 'exit 1: the operation is refused')
  t.equal(refused.stderr, 'pxe-ctl: error: draining b would leave 8 of 64 shards without a node (the other live nodes lack the capacity); add capacity or pass --force\n')
  t.equal(refused.stdout, '')
  const json = await fleet.ctl('drain', 'a', '-o', 'json', '-v')
  t.equal(json.code, 1)
  t.match(json.stderr, 'pxe-ctl: error: draining a would leave 24 of 64 shards without a node (the other live nodes lack the capacity); add capacity or pass --force')
  t.notMatch(json.stderr, /POST/, '-v names no POST: only the plan was read')
  t.equal(json.stdout, '')
  t.equal(await drainRequests(fleet), sentBefore, 'the controller was not asked')
  t.strictSame(await fleet.plan(), start, 'nothing changed')
  t.same(auditLines(fleet, 'drain_set'), [], 'no drain audited')

  const dry = await fleet.ctl('drain', 'b', '--dry-run')
  t.equal(dry.code, 0, dry.stderr)
  t.match(dry.stdout, /^\d+ shards would move: .*8 to no node \(unassigned: no capacity left\)$/m)
  t.match(dry.stdout, /^8 of 64 shards would be left without a node: the other live nodes lack the capacity; the drain needs --force$/m)
  const dryJson = JSON.parse((await fleet.ctl('drain', 'b', '--dry-run', '-o', 'json')).stdout)
  t.match(dryJson, { node_id: 'b', total_shards: 64, unassigned_now: 0, unassigned_after: 8, stranded: 8, to_unassigned: 8 })
  const harmless = await fleet.ctl('drain', 'c', '--dry-run')
  t.match(harmless.stdout, /^0 shards would be left without a node$/m, 'a and b can take c\'s shards')
  t.equal(await drainRequests(fleet), sentBefore, 'dry runs ask nothing either')

  const forced = await fleet.ctl('drain', 'b', '--force')
  t.equal(forced.code, 0, forced.stderr)
  const after = await fleet.plan()
  t.equal(forced.stdout, `b is draining (plan generation ${after.generation}); 8 of 64 shards are without a node\n`)
  t.equal(after.generation, start.generation + 1)
  t.equal(after.unassigned, 8)
  t.match(nodeOf(after, 'b'), { draining: true, range_count: 0 })
  t.match(auditLines(fleet, 'drain_set'), [{ node_id: 'b', draining: true, operator: 'alice', live: true }])

  // 8 have no node now: a drain of c would leave 24, more than now.
  const more = await fleet.ctl('drain', 'c')
  t.equal(more.code, 1)
  t.equal(more.stderr, 'pxe-ctl: error: draining c would leave 24 of 64 shards without a node (8 have none now; the other live nodes lack the capacity); add capacity or pass --force\n')
  t.equal((await fleet.plan()).generation, after.generation, 'nothing changed')
  const moreDry = await fleet.ctl('drain', 'c', '--dry-run')
  t.match(moreDry.stdout, /^24 of 64 shards would be left without a node \(8 now\): the other live nodes lack the capacity; the drain needs --force$/m)

  // A drain that strands nothing more is not refused: b again (already draining), and a name that is not live.
  const again = await fleet.ctl('drain', 'b', '-o', 'json')
  t.equal(again.code, 0, again.stderr)
  t.same(JSON.parse(again.stdout), { node_id: 'b', draining: true, generation: after.generation, live: true, unassigned: 8 })
  const ghost = await fleet.ctl('drain', 'ghost-01', '--force', '-o', 'json')
  t.equal(ghost.code, 0, ghost.stderr)
  t.match(JSON.parse(ghost.stdout), { node_id: 'ghost-01', draining: true, live: false, unassigned: 8 })

  // More capacity: now c's drain strands nothing, and the answer says 0 only in -o json.
  t.equal((await fleet.ctl('undrain', 'b')).code, 0)
  await checkInAll(fleet, { a: 40, b: 24, c: 16, d: 32 })
  const fine = await fleet.ctl('drain', 'c')
  t.equal(fine.code, 0, fine.stderr)
  const last = await fleet.plan()
  t.equal(fine.stdout, `c is draining (plan generation ${last.generation})\n`)
  t.equal(last.unassigned, 0)
  const fineJson = await fleet.ctl('drain', 'd', '--force', '-o', 'json')
  t.equal(fineJson.code, 0, fineJson.stderr)
  t.match(JSON.parse(fineJson.stdout), { node_id: 'd', draining: true, unassigned: 0 })
  t.equal(nodeOf(await fleet.plan(), 'd').draining, true)
})

t.test('drain --force --wait: the outcome with the unassigned count, then the wait', async (t) => {
  const fleet = await startFleet(t, { total_shards: 16, max_concurrency: 1 })
  await checkInAll(fleet, { a: 8, b: 8 })
  const run = fleet.spawn('drain', 'b', '--force', '--wait', '--timeout', '30')
  await until('the drain', () => /b is draining/.test(run.output().stdout))
  // b's shards go to no node; b still releases them by reporting the drain's plan
  const answer = await fleet.checkIn('b', { capacity: 8 })
  await fleet.checkIn('b', { capacity: 8, generation: answer.generation })
  const res = await run.done
  t.equal(res.code, 0, res.stderr)
  const plan = await fleet.plan()
  t.match(res.stdout, new RegExp(`^b is draining \\(plan generation ${plan.generation}\\); 8 of 16 shards are without a node$`, 'm'))
  t.match(res.stdout, /^b holds no shard and its handoffs are released \(after \d+s\)$/m)
  t.equal(plan.unassigned, 8)
})

/** An HTTPS front with the controller's certificate: GET /v1/plan answers `stalePlan`; anything else goes on to `target` as the operator. */
async function staleFront(t: Test, fleet: Fleet, stalePlan: unknown): Promise<{ url: string; passed: string[] }> {
  const passed: string[] = []
  const bundleDir = fleet.operatorBundle
  const server = https.createServer(
    { cert: readFileSync(join(fleet.pki.dir, 'server.pem')), key: readFileSync(join(fleet.pki.dir, 'server-key.pem')), ca: fleet.pki.ca, requestCert: true, rejectUnauthorized: true },
    (req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        if (req.method === 'GET' && req.url === '/v1/plan') {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stalePlan))
          return
        }
        passed.push(`${req.method} ${req.url}`)
        const body = Buffer.concat(chunks)
        const upstream = https.request(
          `${fleet.url}${req.url}`,
          {
            method: req.method,
            headers: { 'content-type': req.headers['content-type'] ?? 'application/json', 'content-length': body.length },
            cert: readFileSync(join(bundleDir, 'cert.pem')),
            key: readFileSync(join(bundleDir, 'key.pem')),
            ca: fleet.pki.ca,
            agent: false,
          },
          (up) => {
            const back: Buffer[] = []
            up.on('data', (c: Buffer) => back.push(c))
            up.on('end', () => res.writeHead(up.statusCode ?? 502, { 'content-type': 'application/json' }).end(Buffer.concat(back)))
          },
        )
        upstream.on('error', () => res.writeHead(502).end())
        upstream.end(body)
      })
    },
  )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, passed }
}

t.test('the plan changed after pxe-ctl read it: the controller\'s 409 insufficient_capacity, exit 1, nothing changed', async (t) => {
  const fleet = await startFleet(t, { total_shards: 64, max_concurrency: 16 })
  await checkInAll(fleet, { a: 32, b: 32, c: 32 })
  const read = await fleet.plan() // what pxe-ctl will be shown: a and c could take b's shards
  await checkInAll(fleet, { a: 32, b: 32, c: 8 }) // c shrinks: now they cannot
  const now = await fleet.plan()
  const front = await staleFront(t, fleet, read)
  const context = join(fleet.root, 'stale.json')
  writeContext(context, [front.url], fleet.operatorBundle)

  const res = await runCtl(['--context', context, 'drain', 'b'], { home: fleet.home })
  t.equal(res.code, 1)
  t.same(front.passed, ['POST /v1/nodes/b/drain'], 'pxe-ctl asked the controller (its plan said the drain was safe)')
  t.match(res.stderr, /^pxe-ctl: error: insufficient_capacity: draining b would leave 24 more shards without a node \(24 in all\)/)
  t.match(res.stderr, /\(from https:\/\/127\.0\.0\.1:\d+\); the plan changed since pxe-ctl read it: check with "pxe-ctl nodes", add capacity, or pass --force\n$/)
  t.equal(res.stdout, '')
  t.strictSame(await fleet.plan(), now, 'the controller changed nothing')

  const forced = await runCtl(['--context', context, 'drain', 'b', '--force', '-o', 'json'], { home: fleet.home })
  t.equal(forced.code, 0, forced.stderr)
  t.match(JSON.parse(forced.stdout), { node_id: 'b', draining: true, live: true, unassigned: 24 })
  t.equal((await fleet.plan()).unassigned, 24)
})

t.test('an older controller: no "force" in its drain body, no "unassigned" in its answer', async (t) => {
  const fleet = await startFleet(t, { total_shards: 16, max_concurrency: 1 })
  // The plan of a controller from before the operator view: no planner, leader, handoffs or flags.
  const plan: Record<string, unknown> = {
    generation: 7, total_shards: 16, max_concurrency: 1, lease_seconds: 30, unassigned: 0,
    nodes: [
      { node_id: 'a', capacity: 8, draining: false, range_start: 0, range_count: 8, last_seen: new Date().toISOString(), generation: 7, ready_shards: 8, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 },
      { node_id: 'b', capacity: 8, draining: false, range_start: 8, range_count: 8, last_seen: new Date().toISOString(), generation: 7, ready_shards: 8, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 },
    ],
  }
  const bodies: unknown[] = []
  const server = https.createServer(
    { cert: readFileSync(join(fleet.pki.dir, 'server.pem')), key: readFileSync(join(fleet.pki.dir, 'server-key.pem')), ca: fleet.pki.ca, requestCert: true, rejectUnauthorized: true },
    (req, res) => {
      let data = ''
      req.setEncoding('utf8').on('data', (d: string) => (data += d))
      req.on('end', () => {
        const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
        if (req.url === '/v1/plan') return send(200, plan)
        const body = JSON.parse(data) as Record<string, unknown>
        bodies.push(body)
        // the older controller's strict body schema
        if ('force' in body) return send(400, { error: 'invalid_request', message: 'invalid drain body: unknown field "force"' })
        return send(200, { node_id: 'b', draining: true, generation: 8 })
      })
    },
  )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const context = join(fleet.root, 'older.json')
  writeContext(context, [`https://127.0.0.1:${(server.address() as AddressInfo).port}`], fleet.operatorBundle)

  const refused = await runCtl(['--context', context, 'drain', 'b'], { home: fleet.home })
  t.equal(refused.code, 1, 'pxe-ctl still refuses a drain that strands shards')
  t.match(refused.stderr, 'draining b would leave 8 of 16 shards without a node')
  t.same(bodies, [], 'and sends nothing')

  const res = await runCtl(['--context', context, 'drain', 'b', '--force'], { home: fleet.home })
  t.equal(res.code, 0, res.stderr)
  t.same(bodies, [{ draining: true, force: true }, { draining: true }], 'sent with force, then again without it')
  t.match(res.stderr, 'pxe-ctl: warning: the controller does not know "force" (an older version, which never refuses a drain for capacity); sent the drain without it')
  t.equal(res.stdout, 'b is draining (plan generation 8)\n', 'an answer without unassigned is accepted (no count printed)')

  // A controller whose planner this pxe-ctl does not know: it cannot predict the drain, says so, and leaves the check to the controller.
  plan.planner = 'quantum-9'
  const unknown = await runCtl(['--context', context, 'drain', 'b'], { home: fleet.home })
  t.equal(unknown.code, 0, unknown.stderr)
  t.match(unknown.stderr, 'pxe-ctl: warning: the controller plans with "quantum-9", which this pxe-ctl does not know; upgrade pxe-ctl to dry-run a drain; whether the drain leaves shards without a node is left to the controller to check')
  t.same(bodies.at(-1), { draining: true })
})
