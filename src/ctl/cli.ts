/** The pxe-ctl process (bin/pxe-ctl.js): main over the real streams, and its status as the exit code. */
import { processIo } from './io.js'
import { main } from './main.js'

process.exitCode = await main(process.argv.slice(2), { io: processIo() })
