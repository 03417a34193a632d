/**
 * A TCP proxy on 127.0.0.1 that can freeze: a network partition as a node sees it. While frozen it
 * forwards nothing either way and holds new connections open without connecting them, so requests
 * time out instead of failing fast (what a dead switch port or a black-holed route does).
 */
import { connect, createServer, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'

/** A running proxy. */
export interface FrozenProxy {
  readonly port: number
  /** Stops forwarding on every connection, old and new. */
  freeze(): void
  close(): Promise<void>
}

/** Starts a proxy to 127.0.0.1:`targetPort`. */
export async function frozenProxy(targetPort: number): Promise<FrozenProxy> {
  let frozen = false
  const sockets = new Set<Socket>()
  const pairs: [Socket, Socket][] = []
  const server: Server = createServer((client) => {
    sockets.add(client)
    client.on('error', () => undefined)
    client.once('close', () => sockets.delete(client))
    if (frozen) {
      client.pause() // held: accepted, never answered
      return
    }
    const upstream = connect(targetPort, '127.0.0.1')
    sockets.add(upstream)
    upstream.on('error', () => client.destroy())
    upstream.once('close', () => sockets.delete(upstream))
    client.once('close', () => upstream.destroy())
    upstream.once('close', () => {
      if (!frozen) client.destroy()
    })
    client.pipe(upstream)
    upstream.pipe(client)
    pairs.push([client, upstream])
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    freeze() {
      frozen = true
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream)
        upstream.unpipe(client)
        client.pause()
        upstream.pause()
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}
