/** Entry point of `pxe-node` (bin/pxe-node.js imports the compiled file). */
import { main } from './cli-main.js'

process.exitCode = await main(process.argv.slice(2), { stdout: (t) => process.stdout.write(t), stderr: (t) => process.stderr.write(t) })
// Everything is closed by now; should a handle linger (a killed command's pipe), do not hang a service stop.
setTimeout(() => process.exit(), 2000).unref()
