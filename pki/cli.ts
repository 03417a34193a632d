#!/usr/bin/env node
/** Entry point of `pxe-pki` / `npm run pki -- <command>`; everything else lives in cli-main.ts. */
import { runCli } from './cli-main.js'

const code = await runCli(process.argv.slice(2), {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
})
process.exitCode = code
