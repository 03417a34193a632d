/** `pxe-ctl completion bash|zsh`: the shell completion script, made from the command table itself. */
import { GLOBAL_FLAGS } from '../args.js'
import type { CommandSpec } from '../command.js'
import { SHELLS, completionScript, type Shell } from '../completion.js'
import { UsageError, shown } from '../errors.js'

const WORDS = 'completion'

/** The command over `commands`: a function, so that the table can list this command too without an import cycle. */
export function completionCommand(commands: () => readonly CommandSpec[]): CommandSpec {
  return {
    words: WORDS,
    usage: SHELLS.join('|'),
    summary: 'print the shell completion script for bash or zsh',
    details: `Prints a script that completes pxe-ctl's commands, their flags, -o's formats, and files or folders where
one is expected. It is made from the same command table pxe-ctl parses with; regenerate it after an upgrade.

  bash, this shell:    source <(pxe-ctl completion bash)
  bash, every shell:   pxe-ctl completion bash | sudo tee /etc/bash_completion.d/pxe-ctl >/dev/null
  zsh, this shell:     source <(pxe-ctl completion zsh)          (after compinit)
  zsh, every shell:    pxe-ctl completion zsh > "\${fpath[1]}/_pxe-ctl"`,
    args: [SHELLS.join('|')],
    flags: [],
    async run(ctx, parsed) {
      const shell = parsed.positionals[0]!
      if (!(SHELLS as readonly string[]).includes(shell)) throw new UsageError(`the shell must be ${SHELLS.join(' or ')} (got ${shown(shell, 32)})`, WORDS)
      // The script as it is, whatever -o says: it is for a shell, not for a person or a JSON parser.
      ctx.io.out(completionScript(shell as Shell, { commands: commands(), globalFlags: GLOBAL_FLAGS }).trimEnd())
    },
  }
}
