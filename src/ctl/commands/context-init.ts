/** `pxe-ctl context init`: writes the context file after checking that the bundle is an operator's. */
import { resolve } from 'node:path'
import { stringFlag, boolFlag } from '../args.js'
import { loadOperatorBundle } from '../bundle.js'
import type { CommandSpec } from '../command.js'
import { contextPath, controllerUrlProblem, writeContextFile } from '../context-file.js'
import { CtlError, UsageError, shown } from '../errors.js'
import { emit } from '../output.js'

const WORDS = 'context init'

function controllerList(value: string | undefined): string[] {
  if (value === undefined || value.trim() === '') throw new UsageError('--controller URL[,URL...] is required', WORDS)
  const urls = value.split(',').map((u) => u.trim())
  for (const url of urls) {
    const problem = url === '' ? 'is empty' : controllerUrlProblem(url)
    if (problem !== null) throw new UsageError(`--controller: ${shown(url)} ${problem}`, WORDS)
  }
  if (new Set(urls.map((u) => new URL(u).origin)).size !== urls.length) throw new UsageError('--controller: a URL is listed twice', WORDS)
  // Stored as origins (https://host:port), the form every request is built from.
  return urls.map((u) => new URL(u).origin)
}

export const contextInit: CommandSpec = {
  words: WORDS,
  usage: '--controller URL[,URL...] --bundle DIR [--force]',
  summary: 'write the context file: which controllers to ask and which operator bundle to present',
  details: `Checks that DIR holds a usable operator bundle (key.pem mode 0600, cert.pem with OU=operator issued by
ca.pem, the key matching, valid now), then writes the context file whole or not at all (mode 0600, its
folder created 0700). The file written is the one --context or $PXE_CONTEXT names, else
~/.config/pxe-ctl/context.json. The bundle path is stored absolute. No request is sent.

Example:
  pxe-ctl context init --controller https://10.0.0.5:8443,https://10.0.0.6:8443 --bundle /etc/pxe-ctl/alice`,
  args: [],
  flags: [
    { name: 'controller', value: 'URLS', help: 'controller base URL(s), comma-separated, https only, no path; asked in this order' },
    { name: 'bundle', value: 'DIR', help: 'the operator bundle folder made by "pxe-pki issue NAME --role operator"' },
    { name: 'force', help: 'replace an existing context file (without it an existing file is never touched)' },
  ],
  async run(ctx, parsed) {
    const controllers = controllerList(stringFlag(parsed, 'controller'))
    const bundleFlag = stringFlag(parsed, 'bundle')
    if (bundleFlag === undefined || bundleFlag === '') throw new UsageError('--bundle DIR is required', WORDS)
    const bundleDir = resolve(bundleFlag)
    const bundle = await loadOperatorBundle(bundleDir, true)
    const path = contextPath(ctx.global.context, ctx.env)
    const content = `${JSON.stringify({ controllers, bundle: bundleDir }, null, 2)}\n`
    try {
      await writeContextFile(path, content, boolFlag(parsed, 'force'))
    } catch (err) {
      if (err instanceof CtlError) throw err
      throw new CtlError(`cannot write context file ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
    }
    const result = { path, controllers, bundle: bundleDir, operator: bundle.name, not_after: bundle.notAfter.toISOString() }
    emit(ctx, result, () => `wrote ${path} (mode 0600): controllers ${controllers.join(', ')}; bundle ${bundleDir} (operator ${bundle.name}, certificate valid until ${result.not_after})`)
  },
}
