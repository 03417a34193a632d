#!/usr/bin/env node
// Runs the compiled controller (npm run build, or npm ci, which builds through `prepare`).
import { runBuilt } from './run-built.js'

await runBuilt('pxe-controller', 'src/main.js')
