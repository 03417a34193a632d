/** The pxe-ctl process (bin/pxe-ctl.js): main over the real streams, and its status as the exit code. */
import { endQuietlyOnClosedPipe } from '../cli-kit/closed-pipe.js'
import { processIo } from './io.js'
import { main } from './main.js'

// `pxe-ctl watch | head -40`: the reader's leaving ends pxe-ctl quietly, not with an EPIPE stack trace.
endQuietlyOnClosedPipe()
process.exitCode = await main(process.argv.slice(2), { io: processIo() })
