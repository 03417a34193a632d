#!/usr/bin/env node
// Runs the compiled controller: dist/ comes with the installed package (npm pack builds it), or in a clone from npm run build / npm ci.
import { runBuilt } from './run-built.js'

await runBuilt('pxe-controller', 'src/main.js')
