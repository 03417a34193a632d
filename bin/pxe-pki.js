#!/usr/bin/env node
// Runs the compiled operator PKI CLI (npm run build, or npm ci, which builds through `prepare`).
import { runBuilt } from './run-built.js'

await runBuilt('pxe-pki', 'pki/cli.js')
