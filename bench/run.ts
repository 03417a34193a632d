/** `npm run bench`: prints every benchmark section. */
import { runCoreBench } from './core-bench.js'

const log = (line: string): void => {
  process.stdout.write(`${line}\n`)
}

await runCoreBench(log)
