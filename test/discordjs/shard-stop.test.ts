// A stop while @discordjs/ws waits for the gateway (HELLO after connecting, READY after an IDENTIFY)
// must end once the socket is closed. @discordjs/ws 2.0.4's destroy() aborts that wait, the aborted wait
// starts a second destroy(), and the second one clears the socket's onclose that the first is awaiting:
// the stop would hang until the agent's stop timeout (seen once in CI as a late stop after a SIGSTOP).
// A gateway that never answers is the one place this shows, so a bare `ws` server stands in here.
import t from 'tap'
import { once } from 'node:events'
import { REST } from '@discordjs/rest'
import { WebSocketServer, type WebSocket } from 'ws'
import { ShardConnection } from '../../src/discordjs/shard-connection.js'
import { SharedGatewayInfo } from '../../src/discordjs/gateway-info.js'

interface Seen {
  connections: number
  closes: number[]
  identifies: number
}

/** A gateway that sends HELLO only when `hello`, and never READY. */
async function silentGateway(hello: boolean): Promise<{ url: string; seen: Seen; stop: () => Promise<void> }> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 })
  await once(wss, 'listening')
  const seen: Seen = { connections: 0, closes: [], identifies: 0 }
  const sockets = new Set<WebSocket>()
  wss.on('connection', (ws) => {
    seen.connections++
    sockets.add(ws)
    ws.on('close', (code) => {
      seen.closes.push(code)
      sockets.delete(ws)
    })
    ws.on('message', (data) => {
      const op = (JSON.parse(String(data)) as { op: number }).op
      if (op === 2) seen.identifies++
      if (op === 1) ws.send(JSON.stringify({ op: 11, d: null }))
    })
    if (hello) ws.send(JSON.stringify({ op: 10, d: { heartbeat_interval: 45_000 } }))
  })
  const { port } = wss.address() as { port: number }
  return {
    url: `ws://127.0.0.1:${port}`,
    seen,
    stop: async () => {
      for (const s of sockets) s.terminate()
      await new Promise<void>((resolve) => wss.close(() => resolve()))
    },
  }
}

async function until(what: string, check: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

function connectionTo(url: string): ShardConnection {
  const gateway = new SharedGatewayInfo(60_000)
  void gateway.get(async () => ({ url, shards: 1, session_start_limit: { total: 1000, remaining: 1000, reset_after: 0, max_concurrency: 1 } }))
  return new ShardConnection({
    shardId: 0,
    totalShards: 1,
    token: 'token',
    intents: 0,
    wsOptions: { rest: new REST().setToken('token'), helloTimeout: 60_000, readyTimeout: 60_000 },
    resume: null,
    claimIdentify: async () => undefined,
    onDispatch: () => undefined,
    gateway,
    maxGrantAgeMs: 60_000,
    grantAgeMs: () => 0,
  })
}

/** Resolves to how long `p` took, or rejects if it takes longer than `ms`. */
async function within<T>(p: Promise<T>, ms: number): Promise<number> {
  const started = performance.now()
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([p, new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms) })])
  } finally {
    clearTimeout(timer)
  }
  return performance.now() - started
}

const cases = [
  ['HELLO', false, false],
  ['READY after the IDENTIFY', true, false],
  ['READY after the IDENTIFY', true, true],
] as const
for (const [name, hello, resumable] of cases) {
  const code = resumable ? 4200 : 1000
  t.test(`a ${resumable ? 'resumable ' : ''}stop while the shard waits for ${name} ends with the socket closed (${code}), and nothing reconnects`, async (t) => {
    const g = await silentGateway(hello)
    t.teardown(g.stop)
    const connection = connectionTo(g.url)
    const abort = new AbortController()
    const started = connection.start(abort.signal)
    started.catch(() => undefined)
    if (hello) await until('the IDENTIFY', () => g.seen.identifies === 1)
    else await until('the connection', () => g.seen.connections === 1)
    await new Promise((r) => setTimeout(r, 50)) // the socket is open and the wait armed
    const tookMs = await within(connection.stop(resumable), 5_000)
    t.ok(tookMs < 2_000, `the stop ended after ${tookMs.toFixed(0)} ms (the bare close handshake takes milliseconds)`)
    await until('the gateway sees the close', () => g.seen.closes.length === 1, 2_000)
    t.same(g.seen.closes, [code], `closed with ${code}`)
    await new Promise((r) => setTimeout(r, 1_000)) // @discordjs/ws reconnects 500 ms after an aborted wait
    t.equal(g.seen.connections, 1, 'no second connection after the stop')
    abort.abort(new Error('test over'))
  })
}
