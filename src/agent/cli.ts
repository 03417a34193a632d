/** Entry point of `pxe-node` (bin/pxe-node.js imports the compiled file). */
import { endQuietlyOnClosedPipe } from '../cli-kit/closed-pipe.js'
import { captureProcessWarnings } from '../log/process-warnings.js'
import { main } from './cli-main.js'

// Node's own warning lines would be plain text among the JSON log lines; main() attaches its logger.
const warnings = captureProcessWarnings('pxe-node')
// `pxe-node --help | head -3`: the reader's leaving ends the process quietly, not with an EPIPE stack
// trace. The agent's logs go through their own descriptor (pino), so this is about the help's text.
endQuietlyOnClosedPipe()
process.exitCode = await main(process.argv.slice(2), { stdout: (t) => process.stdout.write(t), stderr: (t) => process.stderr.write(t), warnings })
// Everything is closed by now; should a handle linger (a killed command's pipe), do not hang a service stop.
setTimeout(() => process.exit(), 2000).unref()
