#!/usr/bin/env node
// Runs the compiled node agent CLI: dist/ comes with the installed package (npm pack builds it), or in a clone from npm run build / npm ci.
import { runBuilt } from './run-built.js'

await runBuilt('pxe-node', 'src/agent/cli.js')
