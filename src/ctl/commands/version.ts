/** `pxe-ctl version` (also `pxe-ctl --version`, `-V`): the installed package's version; no request is sent. */
import { packageVersion } from '../../cli-kit/version.js'
import type { CommandSpec } from '../command.js'
import { emit } from '../output.js'

export const version: CommandSpec = {
  words: 'version',
  usage: '',
  summary: "print pxe-ctl's version (also: pxe-ctl --version, -V)",
  details: `Prints "pxe-ctl <version>", the version of the installed discord-pxe-controller package. With -o json:
{"name": "pxe-ctl", "version": "<version>"}. Reads no context file and asks no controller.`,
  args: [],
  flags: [],
  async run(ctx) {
    const v = packageVersion()
    emit(ctx, { name: 'pxe-ctl', version: v }, () => `pxe-ctl ${v}`)
  },
}
