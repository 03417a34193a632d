/** The REST-budget figures of the product and the control run, side by side, as lines of text. */
import { REST_CONFIG, SAFE_PER_SECOND, type PeriodFigures, type RunFigures } from './figures.js'
import { JITTER_MS } from './share-check.js'

const pct = (x: number) => `${(x * 100).toFixed(0)} %`
const num = (x: number | null, digits = 1) => (x === null ? '-' : x.toFixed(digits))

function row(label: string, product: string, control: string): string {
  return `  ${label.padEnd(44)} ${product.padStart(22)} ${control.padStart(14)}`
}

function counts(record: Readonly<Record<string, number>>): string {
  const entries = Object.entries(record).filter(([, n]) => n > 0)
  return entries.length === 0 ? '0 each' : entries.map(([k, n]) => `${k} ${n}`).join(', ')
}

function periodLines(p: PeriodFigures, c: PeriodFigures | undefined): string[] {
  const lines = [`  steady period "${p.name}" (${p.fromS.toFixed(0)}-${p.toS.toFixed(0)} s)`]
  lines.push(row('  emulator: 200 answers per second', num(p.okPerSecond), num(c?.okPerSecond ?? null)))
  lines.push(row(`  utilisation of the safe budget (${SAFE_PER_SECOND}/s)`, pct(p.utilisation), c ? pct(c.utilisation) : '-'))
  lines.push(row('  requests reaching the emulator per second', num(p.reachedPerSecond), num(c?.reachedPerSecond ?? null)))
  for (const b of p.bots) {
    const cb = c?.bots.find((x) => x.name === b.name)
    const product = `${num(b.okPerSecond)} (share ${num(b.meanShare)}, dem ${num(b.meanDemand)})`
    lines.push(row(`  ${b.name} (wants ${b.wanted}/s): ok per second`, product, num(cb?.okPerSecond ?? null)))
  }
  return lines
}

/** The lines of the side-by-side report. */
export function reportLines(product: RunFigures, control: RunFigures, setup: { leaseSeconds: number; settleS: number }): string[] {
  const lines = [
    `REST budget scenario (issue 61): 4 nodes want 100/s, 5/s, 5/s, 5/s; half-way small-3 leaves, three quarters in small-4 joins with 5/s; ${product.seconds.toFixed(0)} s per run`,
    `  product: a real controller (child process, mTLS; rest ${JSON.stringify(REST_CONFIG)}, lease ${setup.leaseSeconds} s), 4 NodeAgents each with its REST proxy, each bot (@discordjs/rest 2.6.3, default options) pointed at its proxy`,
    `  control: 4 independent @discordjs/rest clients (default options: each believes it has 50/s) straight at the emulator`,
    `  figures over the steady periods: each phase less its first ${setup.settleS} s; the emulator enforces Discord's REST rules (global 50/s in any sliding second)`,
    row('', 'product', 'control'),
    row('global 429s (emulator)', String(product.global429), String(control.global429)),
    row('route 429s (emulator)', String(product.route429), String(control.route429)),
    row('invalid requests at the emulator (total)', String(product.invalidTotal), String(control.invalidTotal)),
    row('bans', String(product.bans), String(control.bans)),
    row('most requests in any sliding 1 s (emulator)', String(product.maxInAnyWindow), String(control.maxInAnyWindow)),
    row('requests at the emulator', String(product.requests), String(control.requests)),
  ]
  for (const [i, p] of product.periods.entries()) lines.push(...periodLines(p, control.periods[i]))
  lines.push(`  invalid requests by node at the emulator: product ${counts(product.invalidByClient)}; control ${counts(control.invalidByClient)}`)
  lines.push(`  product: largest sum of the shares held at once ${num(product.maxShareSum, 2)} (safe budget ${SAFE_PER_SECOND}); 1 s windows with a node above its share: ${product.overShare.length} (arrival jitter allowed: ${Math.max(JITTER_MS, product.maxLoopDelayMs).toFixed(0)} ms, the longest event-loop stall or 100)`)
  for (const [label, f] of [['product', product], ['control', control]] as const) {
    const bots = f.bots.map((b) => `${b.name} ${b.ok}/${b.wanted} ok (unmet ${b.unmet}, failed ${b.failed}, global 429s met ${b.global429Met}, invalid met ${b.invalidMet})`)
    lines.push(`  ${label} bots: ${bots.join('; ')}`)
  }
  return lines
}
