// Exits 0 when tap is built for the plugins package.json configures, 1 when it needs `tap build`.
//
// Why: `tap` works out its test processes' --import flags from the plugins it was built with, and only
// then rebuilds for a changed plugin list ("this won't affect the tap loaded here in the runner"). After
// `npm ci` it is built with its defaults, so the first `tap` of a fresh clone ran every test file with
// @tapjs/typescript's loader (ts-node) beside tsx, which package.json leaves out ("!@tapjs/typescript"):
// CI's Node 20 pass, the first, took 700-741 s where the same files take about 460 s once built.
import { readFileSync } from 'node:fs'
import { TapConfig } from '@tapjs/config'

const config = await TapConfig.load()
const built = readFileSync(new URL(import.meta.resolve('@tapjs/test/test-built')), 'utf8')
const signature = /export const signature = `([^`]*)`/.exec(built)?.[1]?.trim()
if (signature === config.pluginSignature) process.exit(0)
process.stdout.write('tap is built for other plugins than package.json names: rebuilding it (tap build)\n')
process.exit(1)
