/**
 * Where the controller's CPU went, from a V8 `.cpuprofile` (node --cpu-prof): self time by category and
 * the top functions, within a time window. V8 stamps samples with CLOCK_MONOTONIC in µs, the clock of
 * shared-clock.ts, so a window on the benchmark's timeline selects the same samples.
 */
import { z } from 'zod'

const profileSchema = z.object({
  nodes: z.array(z.object({ id: z.number(), callFrame: z.object({ functionName: z.string(), url: z.string(), lineNumber: z.number() }) }).passthrough()),
  startTime: z.number(),
  endTime: z.number(),
  samples: z.array(z.number()),
  timeDeltas: z.array(z.number()),
})

/**
 * What V8's "(idle)" is: V8 marks the thread idle while libuv polls, and native work run from there
 * before any JavaScript (OpenSSL's part of a handshake, TLS reads) stays counted as idle. Measured, in a
 * cold join most of it is CPU: 12 s of the profile busy while the main thread used 24 s.
 */
export const IDLE_MEANS = "idle in V8's view: waiting, or native work outside JavaScript (OpenSSL)"

/** Self time in a window. */
export interface ProfileSummary {
  /** Milliseconds of samples in the window (idle included). */
  readonly totalMs: number
  readonly byCategory: readonly [string, number][]
  readonly topFunctions: readonly [string, number][]
}

const RULES: readonly [RegExp, string][] = [
  [/^\(garbage collector\)$/, 'garbage collection'],
  [/^\(program\)$/, 'native outside JS (TLS handshakes, I/O)'],
  [/^\(idle\)$/, 'idle'],
  [/^(writev|writeUtf8String|writeLatin1String|writeBuffer|shutdown)$/, 'socket writes (native)'],
]
const URL_RULES: readonly [RegExp, string][] = [
  [/\/src\/state\//, 'state writes'],
  [/\/src\/core\/(planner|shard-map|plan-fingerprint|node-index)/, 'planning'],
  [/\/src\/core\//, 'core decisions'],
  [/\/src\/signing\/|\/jose\//, 'plan signing (jose)'],
  [/\/src\/audit\/|\/pino\/|sonic-boom|thread-stream/, 'audit and logs'],
  [/node:_tls|node:tls|node:internal\/tls/, 'TLS (JS side)'],
  [/node:internal\/crypto/, 'node crypto (Ed25519 plan signing, X.509 parsing)'],
  [/node:internal\/modules|node:internal\/bootstrap/, 'startup (module loading)'],
  [/\/fastify\/|find-my-way|avvio|light-my-request|@fastify|fast-json-stringify|secure-json-parse/, 'fastify'],
  [/node:_http|node:internal\/http|node:https|node:http/, 'node http'],
  [/\/zod\//, 'validation (zod)'],
  [/\/src\//, 'controller (http, identity, service)'],
  [/^node:/, 'node internals'],
]

function categoryOf(functionName: string, url: string): string {
  for (const [re, name] of RULES) if (re.test(functionName)) return name
  for (const [re, name] of URL_RULES) if (re.test(url)) return name
  return url === '' ? 'native (V8 and node builtins)' : 'other'
}

function shortUrl(url: string): string {
  const i = url.lastIndexOf('/node_modules/')
  if (i >= 0) return url.slice(i + 14)
  const j = url.lastIndexOf('/dist/')
  return j >= 0 ? url.slice(j + 6) : url
}

const top = (m: Map<string, number>, n: number): [string, number][] => [...m].sort((a, b) => b[1] - a[1]).slice(0, n)

/** Summarizes a profile's samples between `fromMs` and `toMs` (shared timeline; null: the whole profile). */
export function summarizeProfile(raw: unknown, fromMs: number | null, toMs: number | null, topN = 12): ProfileSummary {
  const profile = profileSchema.parse(raw)
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]))
  const byCategory = new Map<string, number>()
  const byFunction = new Map<string, number>()
  let t = profile.startTime
  let totalMs = 0
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000
    const atMs = t / 1000
    if ((fromMs !== null && atMs < fromMs) || (toMs !== null && atMs > toMs)) continue
    const frame = frames.get(profile.samples[i]!)
    if (frame === undefined) continue
    totalMs += ms
    const category = categoryOf(frame.functionName, frame.url)
    byCategory.set(category, (byCategory.get(category) ?? 0) + ms)
    if (category === 'idle') continue
    const label = `${frame.functionName || '(anonymous)'} ${shortUrl(frame.url)}${frame.url ? `:${frame.lineNumber + 1}` : ''}`
    byFunction.set(label, (byFunction.get(label) ?? 0) + ms)
  }
  return { totalMs, byCategory: top(byCategory, 20), topFunctions: top(byFunction, topN) }
}

/** The summary as lines, categories as shares of the busy (non-idle) time. */
export function formatProfile(title: string, s: ProfileSummary): string[] {
  const idle = s.byCategory.find(([name]) => name === 'idle')?.[1] ?? 0
  const busy = s.totalMs - idle
  const pct = (ms: number) => `${((100 * ms) / Math.max(busy, 1)).toFixed(1).padStart(5)} %`
  return [
    `  ${title}: ${(busy / 1000).toFixed(1)} s busy of ${(s.totalMs / 1000).toFixed(1)} s sampled (the rest ${IDLE_MEANS})`,
    ...s.byCategory.filter(([name]) => name !== 'idle').map(([name, ms]) => `    ${pct(ms)}  ${name}`),
    '    top functions (self time):',
    ...s.topFunctions.map(([label, ms]) => `    ${pct(ms)}  ${label}`),
  ]
}
