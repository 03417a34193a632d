/**
 * Developer tool, not part of `npm run bench`: drives connections (handshake, one check-in, close;
 * resumed or full) against the controller and then the ceiling of bench/mtls-target.ts, each under
 * `node --cpu-prof`, and prints where each spent its CPU per connection, side by side by function, so
 * that what the controller does beyond the ceiling stands out.
 *
 *   npm run build && node dist/bench/profile-connections.js [seconds] [rsa|ec] [full|resumed] [function regex]
 *
 * With PXE_PROFILE_KEEP=DIR the two .cpuprofile files are copied into DIR (controller-*, ceiling-*), to
 * be read further or opened in Chrome DevTools.
 */
import { copyFile, mkdir, mkdtemp, readFile, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { initPki } from '../pki/init-pki.js'
import { checkinRequest } from './mtls-client.js'
import { joinAll } from './mtls-checkin.js'
import { visit } from './mtls-handshake.js'
import { makeNodes, makeServerCert } from './mtls-bench.js'
import { startTarget, stopTarget, type ServerKey } from './mtls-process.js'
import { IDLE_MEANS, summarizeProfile } from './fleet/scale/profile-summary.js'

async function main(): Promise<void> {
  const seconds = Number(process.argv[2] ?? '10')
  const key = (process.argv[3] ?? 'ec') as ServerKey
  const mode = process.argv[4] ?? 'resumed'
  const root = await mkdtemp(join(tmpdir(), 'pxe-prof-'))
  const profDir = join(root, 'prof')
  try {
    const pkiDir = join(root, 'pki')
    await initPki(pkiDir)
    await makeServerCert(pkiDir, key)
    const ids = await makeNodes(pkiDir, key)
    const ca = await readFile(join(pkiDir, 'ca.pem'))
    const results: Array<{ kind: string; perConn: Map<string, number>; byCategory: Map<string, number>; cpuMs: number }> = []
    for (const kind of ['controller', 'ceiling'] as const) {
      const dir = join(profDir, kind)
      process.env['PXE_BENCH_PROFILE_DIR'] = dir
      const target = await startTarget(kind, key, root)
      const generation = kind === 'controller' ? await joinAll(target, ca, ids, (id, g) => checkinRequest(id.name, g)) : 1
      const requests = ids.map((id) => checkinRequest(id.name, generation))
      const sessions: Array<Buffer | undefined> = []
      const once = async (i: number): Promise<void> => {
        const outcome = await visit(target, ca, ids[i]!, requests[i]!, mode === 'resumed' ? sessions[i] : undefined)
        if (outcome.session) sessions[i] = outcome.session
      }
      for (let i = 0; i < 16; i++) await once(i) // every client holds a session
      let count = 0
      const until = Date.now() + seconds * 1000
      const cpu0 = await target.cpuMicros()
      await Promise.all(Array.from({ length: 16 }, async (_, i) => {
        while (Date.now() < until) {
          await once(i)
          count++
        }
      }))
      const cpuMs = (await target.cpuMicros() - cpu0) / 1000 / count
      await stopTarget(target)
      const file = (await readdir(dir)).find((f) => f.endsWith('.cpuprofile'))!
      const keep = process.env['PXE_PROFILE_KEEP']
      if (keep !== undefined) {
        await mkdir(keep, { recursive: true })
        await copyFile(join(dir, file), join(keep, `${kind}-${file}`))
      }
      const summary = summarizeProfile(JSON.parse(await readFile(join(dir, file), 'utf8')), null, null, 400)
      // the whole profile includes start-up and the joins: small next to seconds of connections
      results.push({ kind, cpuMs, perConn: new Map(summary.topFunctions.map(([n, ms]) => [n, (ms / count) * 1000])), byCategory: new Map(summary.byCategory.map(([n, ms]) => [n, (ms / count) * 1000])) })
      process.stdout.write(`${kind}: ${count} ${mode} connections, ${cpuMs.toFixed(3)} ms CPU each (process, all threads)\n`)
    }
    const [ctl, ceil] = results as [typeof results[0], typeof results[0]]
    const rowOf = (name: string, a: number, b: number) => `  ${name.slice(0, 90).padEnd(90)} ${a.toFixed(0).padStart(6)} ${b.toFixed(0).padStart(6)} ${(a - b).toFixed(0).padStart(6)}\n`
    process.stdout.write(`${'  by category (µs per connection)'.padEnd(92)} ${'ctl'.padStart(6)} ${'ceil'.padStart(6)} ${'diff'.padStart(6)}\n`)
    const shownName = (name: string) => (name === 'idle' ? IDLE_MEANS : name)
    for (const name of new Set([...ctl.byCategory.keys(), ...ceil.byCategory.keys()])) process.stdout.write(rowOf(shownName(name), ctl.byCategory.get(name) ?? 0, ceil.byCategory.get(name) ?? 0))
    process.stdout.write('  by function, largest difference first\n')
    const names = [...new Set([...ctl.perConn.keys(), ...ceil.perConn.keys()])]
    const diff = (n: string) => (ctl.perConn.get(n) ?? 0) - (ceil.perConn.get(n) ?? 0)
    const only = process.argv[5] === undefined ? null : new RegExp(process.argv[5])
    const shown = names.filter((n) => only === null || only.test(n)).sort((a, b) => Math.abs(diff(b)) - Math.abs(diff(a)))
    for (const name of shown.slice(0, only === null ? 45 : 80)) process.stdout.write(rowOf(name, ctl.perConn.get(name) ?? 0, ceil.perConn.get(name) ?? 0))
  } finally {
    await rm(root, { recursive: true, force: true })
  }
}

main().catch((err: Error) => {
  process.stderr.write(`profile-connections: ${err.stack}\n`)
  process.exit(1)
})
