/** Shared helpers of the PKI tests: OpenSSL as the outside verifier, and directory fingerprints. */
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readdir, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'

const execFileP = promisify(execFile)

/** Runs the openssl CLI; resolves with its output, or with the failure's code and output. */
export async function openssl(args: readonly string[], input?: string): Promise<{ ok: boolean; out: string }> {
  try {
    const child = execFileP('openssl', [...args], { encoding: 'utf8' })
    if (input !== undefined) child.child.stdin?.end(input)
    const { stdout, stderr } = await child
    return { ok: true, out: stdout + stderr }
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string }
    return { ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }
  }
}

/** Every file and folder under `dir` with its mode and the SHA-256 of its content, sorted by path. */
export async function fingerprint(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  async function walk(sub: string): Promise<void> {
    const entries = (await readdir(join(dir, sub))).sort()
    for (const name of entries) {
      const rel = sub === '' ? name : `${sub}/${name}`
      const st = await stat(join(dir, rel))
      const mode = (st.mode & 0o777).toString(8)
      if (st.isDirectory()) {
        out[`${rel}/`] = mode
        await walk(rel)
      } else {
        out[rel] = `${mode} ${createHash('sha256').update(await readFile(join(dir, rel))).digest('hex')}`
      }
    }
  }
  await walk('')
  return out
}

/** The file mode bits (e.g. 0o600) of `path`. */
export async function modeOf(path: string): Promise<number> {
  return (await stat(path)).mode & 0o777
}

/** Makes a key and a CSR with `openssl req` in `work`, as a device would; `keyArgs` pick the key (RSA 2048 by default). */
export async function opensslCsr(work: string, label: string, subject: string, keyArgs: readonly string[] = ['-newkey', 'rsa:2048']): Promise<{ path: string; pem: string }> {
  const path = join(work, `${label}.csr`)
  const res = await openssl(['req', '-new', ...keyArgs, '-nodes', '-keyout', join(work, `${label}.key`), '-out', path, '-subj', subject])
  if (!res.ok) throw new Error(res.out)
  return { path, pem: await readFile(path, 'utf8') }
}

/** `openssl req` arguments of a new EC key on `curve` (e.g. P-256). */
export const ecKey = (curve: string): string[] => ['-newkey', 'ec', '-pkeyopt', `ec_paramgen_curve:${curve}`]
