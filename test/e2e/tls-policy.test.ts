// The TLS policy a network attacker meets: TLS 1.2 at least, ECDHE with AEAD ciphers only, and no
// renegotiation (a DoS lever, and a way to change identity mid-connection in TLS 1.2).
import t from 'tap'
import { connect, type ConnectionOptions } from 'node:tls'
import { bundle, makePki, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'node-a', 'node')
const ctl = await startTestController(pki, root)
t.teardown(() => ctl.running.stop())

/** Opens a TLS connection; resolves with the negotiated protocol, or the error. */
function handshake(opts: ConnectionOptions): Promise<{ protocol: string | null; socket: import('node:tls').TLSSocket } | Error> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port: ctl.port, ca: pki.ca, cert: node.cert, key: node.key, servername: 'localhost', ...opts })
    socket.once('secureConnect', () => resolve({ protocol: socket.getProtocol(), socket }))
    socket.once('error', (err) => resolve(err))
  })
}

t.test('TLS 1.3 and 1.2 with AEAD are accepted', async (t) => {
  for (const version of ['TLSv1.3', 'TLSv1.2'] as const) {
    const r = await handshake({ minVersion: version, maxVersion: version })
    t.notOk(r instanceof Error, `${version} handshake`)
    if (!(r instanceof Error)) {
      t.equal(r.protocol, version)
      r.socket.destroy()
    }
  }
})

t.test('TLS 1.1 and 1.0 are refused', async (t) => {
  for (const version of ['TLSv1.1', 'TLSv1'] as const) {
    const r = await handshake({ minVersion: version, maxVersion: version, ciphers: 'DEFAULT@SECLEVEL=0' })
    t.ok(r instanceof Error, `${version} refused`)
  }
})

t.test('TLS 1.2 without ECDHE or without AEAD is refused', async (t) => {
  for (const cipher of ['AES128-SHA', 'AES256-GCM-SHA384', 'ECDHE-RSA-AES128-SHA256']) {
    const r = await handshake({ maxVersion: 'TLSv1.2', ciphers: cipher })
    t.ok(r instanceof Error, `${cipher} refused`)
  }
})

t.test('renegotiation is refused', async (t) => {
  const r = await handshake({ maxVersion: 'TLSv1.2' })
  if (r instanceof Error) throw r
  const outcome = await new Promise<string>((resolve) => {
    r.socket.once('error', () => resolve('connection failed'))
    r.socket.once('close', () => resolve('closed'))
    const started = r.socket.renegotiate({ rejectUnauthorized: true }, (err) => resolve(err ? 'refused' : 'renegotiated'))
    if (!started) resolve('refused')
  })
  t.not(outcome, 'renegotiated', `renegotiation ${outcome}`)
  r.socket.destroy()
})
