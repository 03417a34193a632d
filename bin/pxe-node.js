#!/usr/bin/env node
// Runs the compiled node agent CLI (npm run build, or npm ci, which builds through `prepare`).
import '../dist/src/agent/cli.js'
