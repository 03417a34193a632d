/**
 * The context file (SPEC "Operator view and operator CLI"): `{"controllers": [URL, ...], "bundle": DIR}`.
 * Found by --context, else $PXE_CONTEXT, else ~/.config/pxe-ctl/context.json. Read with a strict schema
 * (a typo of a key is an error naming the file and the key), refused when group or others can read it,
 * and written whole or not at all (temp file, fsync, link or rename), mode 0600 in a 0700 folder.
 */
import { randomBytes } from 'node:crypto'
import { constants } from 'node:fs'
import { link, mkdir, open, readFile, rename, stat, unlink } from 'node:fs/promises'
import { homedir } from 'node:os'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import { z } from 'zod'
import { CtlError, shown } from './errors.js'
import { controllerUrlProblem } from '../net/controller-url.js'

export { controllerUrlProblem }

const urlSchema = z.string().superRefine((url, ctx) => {
  const problem = controllerUrlProblem(url)
  if (problem !== null) ctx.addIssue({ code: 'custom', message: `${shown(url)} ${problem}` })
})

const contextSchema = z
  .object({
    controllers: z
      .array(urlSchema)
      .min(1, 'must list at least one controller URL')
      .max(16, 'must list at most 16 controller URLs')
      .refine((urls) => new Set(urls.map((u) => new URL(u).origin)).size === urls.length, 'lists a controller twice'),
    bundle: z.string().min(1, 'must name the operator bundle folder'),
  })
  .strict()

/** A context as read: the bundle folder resolved against the context file's folder. */
export interface Context {
  readonly path: string
  readonly controllers: readonly string[]
  readonly bundleDir: string
}

/** Where the context file is: the flag, then $PXE_CONTEXT, then the default under the home folder. */
export function contextPath(flag: string | null, env: NodeJS.ProcessEnv): string {
  if (flag !== null) return resolve(flag)
  const fromEnv = env.PXE_CONTEXT
  if (fromEnv !== undefined && fromEnv !== '') return resolve(fromEnv)
  // $HOME first (on Linux and macOS os.homedir() reads it first too), from `env`: main() run with another env (tests) follows it
  return join(env.HOME || homedir(), '.config', 'pxe-ctl', 'context.json')
}

/** Checks a context object; throws CtlError naming the file and the first bad key. */
export function parseContext(value: unknown, path: string): { controllers: string[]; bundle: string } {
  const result = contextSchema.safeParse(value)
  if (result.success) return result.data
  const issue = result.error.issues[0]!
  const key = issue.path.length === 0 ? '' : `"${issue.path.join('.')}" `
  const message = issue.code === 'unrecognized_keys' ? `unknown key ${issue.keys.map((k) => shown(k, 32)).join(', ')} (allowed: controllers, bundle)` : issue.message
  throw new CtlError(`context file ${path}: ${key}${message}`)
}

/** Reads the context file at `path`; throws CtlError saying what is wrong and how to fix it. */
export async function readContext(path: string): Promise<Context> {
  let mode: number
  let text: string
  try {
    mode = (await stat(path)).mode & 0o777
    text = await readFile(path, 'utf8')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error'
    const hint = code === 'ENOENT' ? '; create it with "pxe-ctl context init --controller URL --bundle DIR"' : ''
    throw new CtlError(`cannot read context file ${path} (${code})${hint}`)
  }
  // It names the key that speaks for the operator: others must not be able to read or rewrite it.
  if ((mode & 0o077) !== 0) throw new CtlError(`context file ${path} is accessible by group or others (mode ${mode.toString(8).padStart(4, '0')}); run chmod 600 ${path}`)
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    throw new CtlError(`context file ${path} is not JSON`)
  }
  const { controllers, bundle } = parseContext(json, path)
  return { path, controllers, bundleDir: isAbsolute(bundle) ? bundle : resolve(dirname(path), bundle) }
}

/**
 * Writes `content` to `path` whole or not at all, mode 0600; its folder is created 0700. Without
 * `overwrite` an existing file is refused (link() fails on an existing name, so a race cannot clobber one).
 */
export async function writeContextFile(path: string, content: string, overwrite: boolean): Promise<void> {
  const dir = dirname(path)
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const tmp = join(dir, `.context-${randomBytes(6).toString('hex')}.tmp`)
  const handle = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)
  try {
    await handle.chmod(0o600) // the umask cannot widen it, but a strange one could have narrowed it to nothing useful
    await handle.writeFile(content)
    await handle.sync()
  } finally {
    await handle.close()
  }
  try {
    if (overwrite) await rename(tmp, path)
    else await link(tmp, path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new CtlError(`context file ${path} already exists; pass --force to replace it`)
    throw new CtlError(`cannot write context file ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  } finally {
    await unlink(tmp).catch(() => undefined) // after rename it is gone already
  }
  const dirHandle = await open(dir, 'r')
  try {
    await dirHandle.sync()
  } finally {
    await dirHandle.close()
  }
}
