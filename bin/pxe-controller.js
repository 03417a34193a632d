#!/usr/bin/env node
// Runs the compiled controller (npm run build, or npm ci, which builds through `prepare`).
import '../dist/src/main.js'
