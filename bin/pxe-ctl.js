#!/usr/bin/env node
// Runs the compiled operator client (npm run build, or npm ci, which builds through `prepare`).
import { runBuilt } from './run-built.js'

await runBuilt('pxe-ctl', 'src/ctl/cli.js')
