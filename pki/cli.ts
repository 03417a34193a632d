#!/usr/bin/env node
/** Entry point of `pxe-pki` / `npm run pki -- <command>`; everything else lives in cli-main.ts. */
import { endQuietlyOnClosedPipe } from '../src/cli-kit/closed-pipe.js'
import { runCli } from './cli-main.js'

// `pxe-pki list | head -3`: the reader's leaving ends pxe-pki quietly, not with an EPIPE stack trace.
endQuietlyOnClosedPipe()
const code = await runCli(process.argv.slice(2), {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
})
process.exitCode = code
