/**
 * A TCP proxy in front of the controller that can be partitioned: while partitioned it forwards no byte
 * either way and holds new connections without connecting them on, every socket kept open — what a
 * network partition looks like to both ends (no reset, no close; requests just time out). Healing
 * resumes forwarding and connects the held connections. It runs in the agent worker, so that only the
 * agents behind it are cut off and the worker (their shard callbacks) keeps running.
 */
import { connect, createServer, type Server, type Socket } from 'node:net'

/** One client socket and, once connected, its upstream socket. */
interface Pair {
  readonly client: Socket
  upstream: Socket | null
}

/** The proxy: listens on 127.0.0.1 on a free port and forwards to `upstreamPort`. */
export class PartitionProxy {
  private readonly server: Server
  private readonly pairs = new Set<Pair>()
  private partitioned = false

  constructor(private readonly upstreamHost: string, private readonly upstreamPort: number) {
    this.server = createServer((client) => this.accept(client))
  }

  /** Starts listening; resolves with the port. */
  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(0, '127.0.0.1', () => {
        const address = this.server.address()
        if (address === null || typeof address === 'string') reject(new Error('the partition proxy has no port'))
        else resolve(address.port)
      })
    })
  }

  /** Stops forwarding both ways; new connections are held. */
  partition(): void {
    this.partitioned = true
    for (const pair of this.pairs) {
      pair.client.pause()
      pair.upstream?.pause()
    }
  }

  /** Forwards again, and connects every connection held meanwhile. */
  heal(): void {
    this.partitioned = false
    for (const pair of this.pairs) {
      if (pair.upstream === null) this.connectUpstream(pair)
      else {
        pair.client.resume()
        pair.upstream.resume()
      }
    }
  }

  /** Closes the listener and every connection. */
  close(): void {
    this.server.close()
    for (const pair of this.pairs) {
      pair.client.destroy()
      pair.upstream?.destroy()
    }
    this.pairs.clear()
  }

  private accept(client: Socket): void {
    const pair: Pair = { client, upstream: null }
    this.pairs.add(pair)
    // Bytes the client sends before it is connected on stay in its buffers (paused, not read).
    client.pause()
    client.on('error', () => pair.upstream?.destroy())
    client.once('close', () => {
      pair.upstream?.destroy()
      this.pairs.delete(pair)
    })
    if (!this.partitioned) this.connectUpstream(pair)
  }

  private connectUpstream(pair: Pair): void {
    const { client } = pair
    if (client.destroyed) return
    const upstream = connect(this.upstreamPort, this.upstreamHost)
    pair.upstream = upstream
    upstream.pause()
    upstream.on('error', () => client.destroy())
    upstream.once('close', () => client.destroy())
    upstream.once('connect', () => {
      forward(client, upstream, () => this.partitioned)
      forward(upstream, client, () => this.partitioned)
      if (!this.partitioned) {
        client.resume()
        upstream.resume()
      }
    })
  }
}

/** Copies `from` to `to` with backpressure; a drain resumes `from` only while not partitioned. */
function forward(from: Socket, to: Socket, partitioned: () => boolean): void {
  from.on('data', (chunk: Buffer) => {
    if (!to.write(chunk)) from.pause()
  })
  to.on('drain', () => {
    if (!partitioned()) from.resume()
  })
  from.once('end', () => to.end())
}
