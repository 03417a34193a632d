/** Test helpers for the ops endpoint: plain-HTTP requests, and a small Prometheus text parser. */
import http from 'node:http'

export interface OpsReply {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly text: string
  readonly json: any
}

/** One plain-HTTP request to the ops endpoint on 127.0.0.1. */
export function opsRequest(port: number, path: string, opts: { method?: string; body?: string; host?: string } = {}): Promise<OpsReply> {
  return new Promise((resolve, reject) => {
    const headers = opts.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(opts.body)) }
    const req = http.request({ host: opts.host ?? '127.0.0.1', port, path, method: opts.method ?? 'GET', headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let json: unknown
        try {
          json = JSON.parse(text)
        } catch {
          json = undefined
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    if (opts.body !== undefined) req.write(opts.body)
    req.end()
  })
}

/** One sample of a scrape: metric name, labels, value. */
export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/
const LABEL_PAIR = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g

/** Parses Prometheus text format 0.0.4 (as prom-client writes it); throws on a line it cannot read. */
export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const m = SAMPLE_LINE.exec(line)
    if (m === null) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const pair of (m[2] ?? '').matchAll(LABEL_PAIR)) labels[pair[1]!] = pair[2]!
    const raw = m[3]!
    samples.push({ name: m[1]!, labels, value: raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw) })
  }
  return samples
}

/** A scrape: the samples, and their value by name and labels. */
export class Scrape {
  constructor(
    readonly text: string,
    readonly samples: readonly Sample[],
  ) {}

  /** The sum of the samples with this name whose labels include `labels`; undefined if none. */
  value(name: string, labels: Record<string, string> = {}): number | undefined {
    const found = this.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    return found.length === 0 ? undefined : found.reduce((sum, s) => sum + s.value, 0)
  }

  /** As `value`, with 0 for a series that does not exist yet. */
  count(name: string, labels: Record<string, string> = {}): number {
    return this.value(name, labels) ?? 0
  }
}

/** GET /metrics, checked for status and content type, parsed. */
export async function scrape(port: number): Promise<Scrape> {
  const res = await opsRequest(port, '/metrics')
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${res.text.slice(0, 200)}`)
  if (!String(res.headers['content-type']).startsWith('text/plain; version=0.0.4')) throw new Error(`/metrics content type ${res.headers['content-type']}`)
  return new Scrape(res.text, parseMetrics(res.text))
}

/** Polls `check` every 50 ms until it holds or `ms` passed; returns whether it held. */
export async function eventually(ms: number, check: () => Promise<boolean> | boolean): Promise<boolean> {
  const end = Date.now() + ms
  for (;;) {
    if (await check()) return true
    if (Date.now() > end) return false
    await new Promise((r) => setTimeout(r, 50))
  }
}
