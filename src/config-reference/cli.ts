/**
 * `npm run config-reference`: writes docs/config-reference.md from the config schema. npm runs scripts
 * from the package's folder, so the page's path is taken relative to the working directory; `--check`
 * only compares (exit 1 when the page is stale), for a pre-commit hook or CI.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { CONFIG_REFERENCE_COMMAND, CONFIG_REFERENCE_PATH, renderConfigReference } from './render.js'

const USAGE = `Usage: ${CONFIG_REFERENCE_COMMAND} [-- --check]\n`

async function main(args: readonly string[]): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`${USAGE}Writes ${CONFIG_REFERENCE_PATH} from the config schema; --check only reports whether it is current.\n`)
    return 0
  }
  const unknown = args.filter((a) => a !== '--check')
  if (unknown.length > 0) {
    process.stderr.write(`config-reference: unknown argument ${JSON.stringify(unknown[0]!.slice(0, 64))}\n${USAGE}`)
    return 2
  }
  const file = resolve(CONFIG_REFERENCE_PATH)
  const page = renderConfigReference()
  if (args.includes('--check')) {
    const current = await readFile(file, 'utf8').catch(() => null)
    if (current === page) return 0
    process.stderr.write(`${CONFIG_REFERENCE_PATH} is ${current === null ? 'missing' : 'out of date'}: run ${CONFIG_REFERENCE_COMMAND}\n`)
    return 1
  }
  await mkdir(dirname(file), { recursive: true })
  await writeFile(file, page)
  process.stdout.write(`wrote ${CONFIG_REFERENCE_PATH}\n`)
  return 0
}

process.exitCode = await main(process.argv.slice(2))
