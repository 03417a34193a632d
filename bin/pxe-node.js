#!/usr/bin/env node
// Runs the compiled node agent CLI (npm run build, or npm ci, which builds through `prepare`).
import { runBuilt } from './run-built.js'

await runBuilt('pxe-node', 'src/agent/cli.js')
