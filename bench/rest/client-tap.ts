/**
 * A transparent hop between one node's REST proxy and the emulator that names the node in the
 * emulator's client header. On Discord each node would send from its own IP address; here every proxy
 * sends from 127.0.0.1, and the proxy forwards only the headers Discord needs, so without the tap the
 * emulator would count the four nodes as one client. With it, its records say which node sent each
 * request (per-node rates and invalid counts). It changes nothing else: method, path, headers and body
 * go through as they came, and the answer comes back as the emulator gave it.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { CLIENT_HEADER } from './control-side.js'

/** A running tap. */
export interface ClientTap {
  /** The upstream to give the node's proxy (`http://127.0.0.1:PORT/api`). */
  readonly url: string
  close(): Promise<void>
}

/** Starts a tap that forwards to `emulatorPort` (on 127.0.0.1) as client `name`. */
export async function startClientTap(name: string, emulatorPort: number): Promise<ClientTap> {
  const agent = new http.Agent({ keepAlive: true })
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const upstream = http.request(
      { host: '127.0.0.1', port: emulatorPort, method: req.method, path: req.url, headers: { ...req.headers, [CLIENT_HEADER]: name }, agent },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      },
    )
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' })
      res.end('{"message":"tap: the emulator did not answer","code":0}')
    })
    req.pipe(upstream)
  })
  server.keepAliveTimeout = 5000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}/api`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
        agent.destroy()
      }),
  }
}
