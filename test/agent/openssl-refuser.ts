/**
 * A controller stand-in that refuses a client certificate the way OpenSSL itself does: `openssl s_server`
 * with the PKI's server certificate, verifying clients against the CA and the CRL, and ending a handshake
 * whose certificate fails with the TLS alert that names why (a revoked one: alert 44, "certificate
 * revoked"). A Node server never sends such an alert (it closes the connection instead), so this is the
 * one way to put a real alert on the wire. A certificate that passes gets s_server's status page; the
 * agent's tests only use it to refuse.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import type { Pki } from '../e2e/harness.js'
import { closedPort } from '../support/closed-port.js'

/** A running `openssl s_server`. */
export interface OpensslRefuser {
  readonly port: number
  close(): Promise<void>
}

/** Options of opensslRefuser. */
export interface OpensslRefuserOptions {
  /**
   * The CA that client certificates are verified against (default the PKI's own, with its CRL as it is
   * now: a later revocation needs a new s_server). Another CA's file: every client is refused with
   * "unknown ca", as by a replica configured with the wrong CA.
   */
  readonly clientCaFile?: string
  /** The port to listen on (default a free one): a restart on the same port keeps the agent's URL. */
  readonly port?: number
}

/** Starts s_server on 127.0.0.1 with the PKI's server certificate. */
export async function opensslRefuser(pki: Pki, opts: OpensslRefuserOptions = {}): Promise<OpensslRefuser> {
  const port = opts.port ?? (await closedPort())
  const clientCheck = opts.clientCaFile === undefined ? ['-CAfile', join(pki.dir, 'ca.pem'), '-CRL', join(pki.dir, 'crl.pem'), '-crl_check'] : ['-CAfile', opts.clientCaFile]
  const child: ChildProcess = spawn('openssl', [
    's_server', '-accept', `127.0.0.1:${port}`, '-www',
    '-cert', join(pki.dir, 'server.pem'), '-key', join(pki.dir, 'server-key.pem'),
    '-Verify', '1', '-verify_return_error', ...clientCheck,
  ], { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`openssl s_server did not start: ${output}`)), 10_000)
    const seen = (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes('ACCEPT')) {
        clearTimeout(timer)
        resolve()
      }
    }
    child.stdout!.on('data', seen)
    child.stderr!.on('data', seen)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`openssl s_server exited (${code}): ${output}`))
    })
  })
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve()
        child.once('exit', () => resolve())
        child.kill('SIGTERM')
      }),
  }
}
