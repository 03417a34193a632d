// pxe-ctl's read side against a real controller: status and nodes as aligned tables and as the
// controller's JSON, with three nodes checked in (one draining) and a drain flag of a name that is not
// live; route; reshard (start, status, abort, --wait until the switch); watch until SIGINT.
import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { request } from '../e2e/harness.js'
import { CLI, startFleet, until } from './support.js'

const fleet = await startFleet(t, { planner: 'stable', daily_identify_limit: 1000 })
const operator = await fleet.node('compaq-01') // any identity works for the route comparison
for (const name of ['compaq-01', 'compaq-02', 'dell-01']) await fleet.checkIn(name, { capacity: 32 })
// Setup by the CLI itself (asserted in drain.test.ts); a top-level assertion would end the root test early.
for (const args of [['drain', 'compaq-02'], ['drain', 'ghost-01', '--force']]) {
  const res = await fleet.ctl(...args)
  if (res.code !== 0) throw new Error(`${args.join(' ')}: ${res.stderr}`)
}
// Every node acknowledges the current plan, with some shards ready.
const generation = (await fleet.plan()).generation
for (const name of ['compaq-01', 'compaq-02', 'dell-01']) await fleet.checkIn(name, { capacity: 32, generation, next_ready_shards: 0, ready_shards: name === 'compaq-02' ? 0 : 30, starting_shards: name === 'compaq-02' ? 0 : 2 })

t.test('status: one aligned block with every field of the SPEC', async (t) => {
  const res = await fleet.ctl('status')
  t.equal(res.code, 0, res.stderr)
  t.equal(res.stderr, '')
  const lines = res.stdout.trimEnd().split('\n')
  const keys = lines.map((l) => l.split(/\s{2,}/)[0])
  t.same(keys.slice(0, 9), ['controller', 'leader', 'generation', 'planner', 'shards', 'nodes', 'pending handoffs', 'identify budget', 'reshard'])
  const valueColumn = lines.map((l) => l.search(/\s{2}\S/) + 2)
  t.ok(lines.every((l, i) => l[valueColumn[0]! - 1] === ' ' && l.slice(0, valueColumn[0]).trim() === keys[i]), 'values start in one column')
  t.match(res.stdout, `controller        ${fleet.url}`)
  t.match(res.stdout, /^leader\s+test-controller$/m)
  t.match(res.stdout, new RegExp(`^generation\\s+${generation}$`, 'm'))
  t.match(res.stdout, /^shards\s+64 total, 0 unassigned \(max_concurrency 16\)$/m)
  t.match(res.stdout, /^nodes\s+3 live, 1 draining \(lease 30 s\)$/m)
  t.match(res.stdout, /^planner\s+stable$/m)
  t.match(res.stdout, /^pending handoffs\s+0$/m)
  t.match(res.stdout, /^identify budget\s+0\/1000 used in 24h, 1000 remaining, nothing to release$/m)
  t.match(res.stdout, /^reshard\s+none$/m)
  t.match(res.stdout, /^drain flags\s+ghost-01 \(not live: kept for when they join\)$/m)

  const json = await fleet.ctl('status', '-o', 'json')
  t.equal(json.code, 0, json.stderr)
  t.same(JSON.parse(json.stdout), await fleet.plan(), '-o json is the controller\'s plan as it sent it')
})

t.test('nodes: one row per node in byte order, aligned, with range, health, generation, age and flags', async (t) => {
  const res = await fleet.ctl('nodes')
  t.equal(res.code, 0, res.stderr)
  const lines = res.stdout.trimEnd().split('\n')
  t.match(lines[0], /^NODE\s+RANGE\s+COUNT\s+CAP\s+READY\/START\/BACKOFF\/FATAL\s+GEN\s+LAST SEEN\s+CERT LEFT\s+FLAGS$/)
  const flagsAt = lines[0]!.indexOf('FLAGS')
  const rows = lines.slice(1, 4)
  t.same(rows.map((l) => l.split(/\s+/)[0]), ['compaq-01', 'compaq-02', 'dell-01'])
  for (const row of rows) t.equal(row[flagsAt - 1], ' ', `FLAGS column aligned: ${row}`)
  t.match(rows[0], new RegExp(`^compaq-01\\s+0-31\\s+32\\s+32\\s+30/2/0/0\\s+${generation}\\s+\\d+s\\s+\\d+d(\\d+h)?\\s+-$`))
  t.match(rows[1], new RegExp(`^compaq-02\\s+-\\s+0\\s+32\\s+0/0/0/0\\s+${generation}\\s+\\d+s\\s+\\d+d(\\d+h)?\\s+draining$`))
  t.match(rows[2], new RegExp(`^dell-01\\s+32-63\\s+32\\s+32\\s+30/2/0/0\\s+${generation}\\s+\\d+s\\s+\\d+d(\\d+h)?\\s+-$`))
  const plan = await fleet.plan()
  t.match(lines[4], /^ghost-01: flagged for drain, not live \(no check-in within the lease\); the flag is kept for when it joins$/)
  t.equal(lines.length, 5)

  const json = await fleet.ctl('nodes', '-o', 'json')
  t.equal(json.code, 0, json.stderr)
  const parsed = JSON.parse(json.stdout)
  t.same(parsed, { generation: plan.generation, nodes: plan.nodes, drain_flags_not_live: ['ghost-01'] })
})

t.test('route: the shard and node of a guild, as the controller computes them', async (t) => {
  const guild = String((19n << 22n) + 12345n)
  const res = await fleet.ctl('route', guild)
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, new RegExp(`^guild\\s+${guild}$`, 'm'))
  t.match(res.stdout, /^shard\s+19$/m)
  t.match(res.stdout, /^node\s+compaq-01$/m)
  const json = await fleet.ctl('route', guild, '-o', 'json')
  const direct = await request(fleet.controller.port, fleet.pki.ca, operator, `/v1/route/${guild}`)
  t.same(JSON.parse(json.stdout), direct.json)
  for (const bad of ['012', '-1', '18446744073709551616', 'abc']) {
    const refused = await fleet.ctl('route', bad)
    t.equal(refused.code, 2, `${bad}: a usage error`)
    t.match(refused.stderr, bad === '-1' ? /unknown option -1\n/ : /must be a canonical decimal snowflake/)
    t.match(refused.stderr, /usage: pxe-ctl route GUILD_ID/)
  }
})

t.test('reshard: refusals exit 1 with the message of the controller, a start, status, abort, and --wait until the switch', async (t) => {
  const refused = await fleet.ctl('reshard', '24') // not a multiple of max_concurrency (16)
  t.equal(refused.code, 1)
  t.match(refused.stderr, /^pxe-ctl: error: invalid_request: total_shards \(24\) must be a multiple of max_concurrency \(16\)/)
  const nothing = await fleet.ctl('reshard', 'abort')
  t.equal(nothing.code, 1)
  t.match(nothing.stderr, /not_found: no live reshard is in progress/)
  const before = await fleet.ctl('reshard', 'status')
  t.equal(before.code, 0, before.stderr)
  t.match(before.stdout, /^shards\s+64$/m)
  t.match(before.stdout, /^reshard\s+none$/m)

  const started = await fleet.ctl('reshard', '128')
  t.equal(started.code, 0, started.stderr)
  t.match(started.stdout, /^reshard from 64 to 128 shards started \(generation \d+\)$/m)
  const busy = await fleet.ctl('reshard', '32')
  t.equal(busy.code, 1)
  t.match(busy.stderr, /reshard_in_progress/)
  const during = await fleet.ctl('reshard', 'status', '-o', 'json')
  t.match(JSON.parse(during.stdout).reshard, { phase: 'identifying', from_total_shards: 64, total_shards: 128 })
  const aborted = await fleet.ctl('reshard', 'abort')
  t.equal(aborted.code, 0, aborted.stderr)
  t.match(aborted.stdout, /reshard aborted/)
  const refusedUntilReported = await fleet.ctl('reshard', '32')
  t.equal(refusedUntilReported.code, 1, 'a new reshard waits until the nodes report the abort')
  t.match(refusedUntilReported.stderr, /reshard_in_progress: nodes? .* may still run shards of the 128-shard set/)
  // The nodes report the abort's plan (their agents stopped the aborted set's shards).
  const abortGeneration = (await fleet.plan()).generation
  for (const name of ['compaq-01', 'compaq-02', 'dell-01']) await fleet.checkIn(name, { capacity: 32, generation: abortGeneration, next_ready_shards: 0 })

  // --wait: the nodes report their next-set shards running, the controller switches, pxe-ctl returns
  const run = fleet.spawn('reshard', '32', '--wait', '--timeout', '60')
  await until('the reshard started', async () => (await fleet.plan()).reshard?.total_shards === 32)
  for (let round = 0; round < 3 && (await fleet.plan()).total_shards !== 32; round++) {
    const generation = (await fleet.plan()).generation
    for (const name of ['compaq-01', 'compaq-02', 'dell-01']) {
      const answer = await fleet.checkIn(name, { capacity: 32, generation, ready_shards: 0 })
      if (answer.next !== undefined) await fleet.checkIn(name, { capacity: 32, generation, next_ready_shards: answer.next.range_count })
    }
  }
  const res = await run.done
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, /switched to 32 shards/)
  t.equal((await fleet.plan()).total_shards, 32)
  for (const args of [['reshard', '0'], ['reshard', '65537'], ['reshard', 'many'], ['reshard', 'status', '--wait'], ['reshard', '128', '--timeout', '5']]) {
    const usage = await fleet.ctl(...args)
    t.equal(usage.code, 2, `${args.join(' ')}: usage error`)
  }
})

t.test('watch: the status refreshed until SIGINT, then exit 0; -o json one plan per line', async (t) => {
  // The nodes renew first: on a loaded box the tests before this one can outlast the 30 s lease.
  for (const name of ['compaq-01', 'compaq-02', 'dell-01']) await fleet.checkIn(name, { capacity: 32, generation: (await fleet.plan()).generation })
  const run = fleet.spawn('watch', '--interval', '0.3')
  await until('two refreshes', () => (run.output().stdout.match(/^--- /gm) ?? []).length >= 2)
  run.child.kill('SIGINT')
  const res = await run.done
  t.equal(res.code, 0, res.stderr)
  t.equal(res.stderr, '')
  t.notMatch(res.stdout, /\x1b\[/, 'no screen clearing or colour on a pipe')
  t.match(res.stdout, /^generation\s+\d+$/m)
  t.match(res.stdout, /^NODE\s+RANGE/m)

  const json = fleet.spawn('watch', '--interval', '0.3', '-o', 'json')
  await until('two JSON refreshes', () => json.output().stdout.split('\n').filter(Boolean).length >= 2)
  json.child.kill('SIGINT')
  const out = await json.done
  t.equal(out.code, 0, out.stderr)
  for (const line of out.stdout.trim().split('\n')) t.equal(JSON.parse(line).total_shards, 32, 'the count the reshard test switched to')
})

t.test('watch | head: the reader leaving ends the watch quietly, status 0 under pipefail (no EPIPE stack trace)', async (t) => {
  for (const name of ['compaq-01', 'compaq-02', 'dell-01']) await fleet.checkIn(name, { capacity: 32, generation: (await fleet.plan()).generation })
  // A real shell pipeline: head takes the first refresh's 3 lines and exits; the next refresh's write
  // then meets a closed pipe. PIPESTATUS[0] is pxe-ctl's own status; stderr is pxe-ctl's alone.
  const command = `set -o pipefail; ${process.execPath} ${CLI} --context ${fleet.contextFile} watch --interval 0.2 | head -3; echo "status \${PIPESTATUS[0]}"`
  const child = spawn('bash', ['-c', command], { env: { PATH: process.env.PATH, HOME: fleet.home, NODE_OPTIONS: '' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d))
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d))
  const code = await new Promise((resolve) => child.on('close', resolve))
  t.equal(code, 0, 'the pipeline succeeds under pipefail')
  t.match(out, /^--- \d{4}-.*\ncontroller\s+https:.*\nleader\s+\S+\nstatus 0\n$/, 'three lines through head, then pxe-ctl ended with 0')
  t.equal(err, '', 'nothing on stderr: no EPIPE, no stack trace')
})

t.test('watch on a terminal clears the screen before each refresh', { skip: existsSync('/usr/bin/script') ? false : 'no script(1) for a pseudo-terminal' }, async (t) => {
  // script(1) gives the CLI a pseudo-terminal; timeout(1) sends it SIGINT and passes its exit status on.
  // 5 s for two refreshes 0.3 s apart: with 2 s, a CI run on a busy machine saw only one (the process
  // start and the first answer took the rest).
  const command = `timeout --preserve-status -s INT 5 ${process.execPath} ${CLI} --context ${fleet.contextFile} watch --interval 0.3`
  const child = spawn('script', ['-qec', command, '/dev/null'], { env: { PATH: process.env.PATH, HOME: fleet.home, NODE_OPTIONS: '' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d))
  const code = await new Promise((resolve) => child.on('close', resolve))
  t.equal(code, 0, out)
  t.ok((out.match(/\x1b\[H\x1b\[2J/g) ?? []).length >= 2, 'the screen is cleared at every refresh')
  t.match(out, /every 0\.3s, \d{4}-/)
  t.notMatch(out, /^--- /m, 'no separator lines on a terminal')
})
