#!/usr/bin/env node
// Runs the compiled operator PKI CLI: dist/ comes with the installed package (npm pack builds it), or in a clone from npm run build / npm ci.
import { runBuilt } from './run-built.js'

await runBuilt('pxe-pki', 'pki/cli.js')
