#!/usr/bin/env node
// Runs the compiled operator client (npm run build, or npm ci, which builds through `prepare`).
import '../dist/src/ctl/cli.js'
