#!/usr/bin/env -S node --single-threaded-gc
// (The flag: src/controller-node-flags.ts. `env -S` splits the line: GNU coreutils 8.30+, BSD, macOS.)
// Runs the compiled controller (npm run build, or npm ci, which builds through `prepare`).
import { runBuilt } from './run-built.js'

await runBuilt('pxe-controller', 'src/main.js')
