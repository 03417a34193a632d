// Shared by the bins: they run the compiled JavaScript in dist/ and never compile (an installed tarball
// carries dist/; a clone builds it through npm ci or npm run build). Without a build
// (a fresh clone before `npm ci`, or `npm ci --ignore-scripts`) they say so in one line, no stack trace.
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/** Imports `dist/<entry>` of this package, or exits 1 with a one-line hint when it was never built. */
export async function runBuilt(bin, entry) {
  const url = new URL(`../dist/${entry}`, import.meta.url)
  if (!existsSync(url)) {
    const root = fileURLToPath(new URL('..', import.meta.url))
    process.stderr.write(`${bin}: ${fileURLToPath(url)} is missing: run npm run build (or npm ci) in ${root} first\n`)
    process.exit(1)
  }
  await import(url.href)
}
