/**
 * Shell completion scripts for pxe-ctl, generated from the command table the parser uses (commands,
 * groups, flags, positional arguments), so that they cannot drift from it: a new command or flag is
 * completed as soon as it is in the table. Both scripts complete the same things: the command words
 * (`dr` → drain, `context i` → init), the flags of the command on the line and the global ones, the
 * values of a flag with fixed choices (-o table|json), files and folders where a FILE or DIR is
 * expected, and the fixed words of a positional argument (`reshard abort|status`, `completion bash|zsh`).
 */
import type { CommandSpec, FlagSpec } from './command.js'

/** The shells a script is generated for. */
export const SHELLS = ['bash', 'zsh'] as const
export type Shell = (typeof SHELLS)[number]

/** What a word on the line completes to: fixed words, files, folders, or nothing (a number, a name). */
type Completion = { readonly kind: 'words'; readonly words: readonly string[] } | { readonly kind: 'files' } | { readonly kind: 'dirs' } | { readonly kind: 'none' }

/** What the scripts are made from: the command table and the flags every command takes. */
export interface CompletionTable {
  readonly commands: readonly CommandSpec[]
  readonly globalFlags: readonly FlagSpec[]
}

// Everything the generator writes into a script comes from the table; it is checked to be plain words,
// so that no summary or name can break the script's quoting.
const WORD = /^[a-z0-9][a-z0-9-]*$/

function word(w: string): string {
  if (!WORD.test(w)) throw new Error(`completion: ${JSON.stringify(w)} is not a plain word`)
  return w
}

function flagValue(f: FlagSpec): Completion {
  if (f.choices !== undefined) return { kind: 'words', words: f.choices.map(word) }
  if (f.value === 'FILE') return { kind: 'files' }
  if (f.value === 'DIR') return { kind: 'dirs' }
  return { kind: 'none' }
}

/** A positional argument by its name in the usage: FILE, or fixed words (`N|abort|status` → abort, status). */
function argValue(name: string): Completion {
  if (name === 'FILE') return { kind: 'files' }
  const words = name.split('|').filter((w) => WORD.test(w))
  return words.length > 0 ? { kind: 'words', words } : { kind: 'none' }
}

function flagNames(flags: readonly FlagSpec[]): string[] {
  return flags.flatMap((f) => [`--${word(f.name)}`, ...(f.short ? [`-${word(f.short)}`] : [])])
}

/** Every flag that takes a value (as a case pattern: `--output|-o`), with what its value completes to; one flag name means one thing in every command. */
function valueFlags(table: CompletionTable): Map<string, Completion> {
  const shapes = new Map<string, string>()
  const out = new Map<string, Completion>()
  for (const f of [...table.globalFlags, ...table.commands.flatMap((c) => c.flags)]) {
    // The scripts skip a flag's value by the flag's name alone, whatever the command: a name that takes
    // a value in one command and not in another (or completes differently) would complete wrongly.
    const shape = JSON.stringify([f.value !== undefined, flagValue(f), f.short ?? null])
    if ((shapes.get(f.name) ?? shape) !== shape) throw new Error(`completion: --${f.name} differs between commands`)
    shapes.set(f.name, shape)
    if (f.value !== undefined) out.set(flagNames([f]).join('|'), flagValue(f))
  }
  return out
}

interface Model {
  /** First words: commands, groups, then help. */
  readonly top: readonly string[]
  /** Group → its second words. */
  readonly groups: ReadonlyMap<string, readonly string[]>
  /** Flags that take a value (a case pattern of its names) → what the value completes to. */
  readonly values: ReadonlyMap<string, Completion>
  readonly globalFlags: readonly string[]
  readonly commands: readonly { readonly words: string; readonly summary: string; readonly flags: readonly string[]; readonly args: readonly Completion[] }[]
}

function model(table: CompletionTable): Model {
  const top: string[] = []
  const groups = new Map<string, string[]>()
  for (const c of table.commands) {
    const [first, second] = c.words.split(' ').map(word)
    if (!top.includes(first!)) top.push(first!)
    if (second !== undefined) groups.set(first!, [...(groups.get(first!) ?? []), second])
  }
  top.push('help')
  return {
    top,
    groups,
    values: valueFlags(table),
    globalFlags: flagNames(table.globalFlags),
    commands: table.commands.map((c) => ({ words: c.words, summary: c.summary, flags: flagNames(c.flags), args: c.args.map(argValue) })),
  }
}

/** The completion script of `shell`. */
export function completionScript(shell: Shell, table: CompletionTable): string {
  return shell === 'bash' ? bashScript(model(table)) : zshScript(model(table))
}

function bashReply(c: Completion): string {
  if (c.kind === 'words') return `_pxe_ctl_reply -W "${c.words.join(' ')}"`
  if (c.kind === 'files') return 'compopt -o filenames 2>/dev/null; _pxe_ctl_reply -f'
  if (c.kind === 'dirs') return 'compopt -o filenames 2>/dev/null; _pxe_ctl_reply -d'
  return 'COMPREPLY=()'
}

/** The scan that finds the command's words: arguments that are neither a flag nor a flag's value. */
function scanCases(m: Model, indent: string): string {
  return `${indent}${[...m.values.keys()].join('|')}) ((i++)) ;;`
}

function bashScript(m: Model): string {
  const groupNames = [...m.groups.keys()]
  const valueCases = [...m.values].map(([flag, c]) => `    ${flag}) ${bashReply(c)}; return ;;`)
  const flagCases = m.commands.map((c) => `      '${c.words}') _pxe_ctl_reply -W "${[...c.flags, ...m.globalFlags].join(' ')}" ;;`)
  const argCases = m.commands
    .filter((c) => c.args.some((a) => a.kind !== 'none'))
    .map((c) => `    '${c.words}') case $npos in ${c.args.map((a, i) => `${i}) ${bashReply(a)} ;;`).join(' ')} esac ;;`)
  const groupCases = [...m.groups].map(([g, subs]) => `    '${g}') _pxe_ctl_reply -W "${[...subs, 'help'].join(' ')}" ;;`)
  const helpGroupCases = [...m.groups].map(([g, subs]) => `${g}) _pxe_ctl_reply -W "${subs.join(' ')}" ;;`).join(' ')
  return `# bash completion for pxe-ctl, generated by "pxe-ctl completion bash" from pxe-ctl's own command table
# (regenerate it after an upgrade). For this shell:  source <(pxe-ctl completion bash)
# For every shell:  pxe-ctl completion bash | sudo tee /etc/bash_completion.d/pxe-ctl >/dev/null

_pxe_ctl_reply() {
  mapfile -t COMPREPLY < <(compgen "$@" -- "$cur")
}

_pxe_ctl() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]}
  local -a args=()
  local i w
  COMPREPLY=()
  # The words typed so far that are neither flags nor a flag's value: the command, then its arguments.
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=\${COMP_WORDS[i]}
    case $w in
${scanCases(m, '      ')}
      -*) ;;
      *) args+=("$w") ;;
    esac
  done
  local cmd=\${args[0]-} npos=$((\${#args[@]} > 0 ? \${#args[@]} - 1 : 0))
  case $cmd in
    ${groupNames.join('|')}) if ((npos > 0)); then cmd="$cmd \${args[1]}"; npos=$((npos - 1)); fi ;;
  esac

  # The value of a flag that takes one.
  case $prev in
${valueCases.join('\n')}
  esac

  if [[ $cur == -* ]]; then
    case $cmd in
${flagCases.join('\n')}
      *) _pxe_ctl_reply -W "${[...m.globalFlags, '--version', '-V'].join(' ')}" ;;
    esac
    return
  fi

  case $cmd in
    '') _pxe_ctl_reply -W "${m.top.join(' ')}" ;;
${groupCases.join('\n')}
    'help') case $npos in 0) _pxe_ctl_reply -W "${m.top.filter((w) => w !== 'help').join(' ')}" ;; 1) case \${args[1]} in ${helpGroupCases} esac ;; esac ;;
${argCases.join('\n')}
  esac
}

complete -F _pxe_ctl pxe-ctl
`
}

/** A zsh single-quoted string. */
function zq(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`
}

function zshReply(c: Completion): string {
  if (c.kind === 'words') return `compadd -- ${c.words.join(' ')}`
  if (c.kind === 'files') return '_files'
  if (c.kind === 'dirs') return '_files -/'
  return ':'
}

function zshScript(m: Model): string {
  const described = (words: readonly string[], summaryOf: (w: string) => string) => words.map((w) => zq(`${w}:${summaryOf(w)}`)).join(' ')
  const summary = (words: string) => m.commands.find((c) => c.words === words)?.summary ?? (m.groups.has(words) ? `${words} commands` : 'the help of a command')
  const groupNames = [...m.groups.keys()]
  const valueCases = [...m.values].map(([flag, c]) => `    (${flag}) ${zshReply(c)}; return ;;`)
  const flagCases = m.commands.map((c) => `      (${zq(c.words)}) compadd -- ${[...c.flags, ...m.globalFlags].join(' ')} ;;`)
  const argCases = m.commands
    .filter((c) => c.args.some((a) => a.kind !== 'none'))
    .map((c) => `    (${zq(c.words)}) case $npos in ${c.args.map((a, i) => `(${i}) ${zshReply(a)} ;;`).join(' ')} esac ;;`)
  const groupCases = [...m.groups].map(([g, subs]) => {
    const items = described(subs, (s) => summary(`${g} ${s}`))
    return `    (${zq(g)}) local -a subs=(${items} ${zq('help:the commands of this group')}); _describe -t commands ${zq(`pxe-ctl ${g} command`)} subs ;;`
  })
  const helpGroupCases = [...m.groups].map(([g, subs]) => `(${g}) compadd -- ${subs.join(' ')} ;;`).join(' ')
  return `#compdef pxe-ctl
# zsh completion for pxe-ctl, generated by "pxe-ctl completion zsh" from pxe-ctl's own command table
# (regenerate it after an upgrade). For this shell, after compinit:  source <(pxe-ctl completion zsh)
# For every shell: save it as _pxe-ctl in a folder of $fpath, e.g.
#   pxe-ctl completion zsh > "\${fpath[1]}/_pxe-ctl"

_pxe-ctl() {
  local cur=\${words[CURRENT]} prev=\${words[CURRENT-1]}
  local -a args
  local i w
  # The words typed so far that are neither flags nor a flag's value: the command, then its arguments.
  for ((i = 2; i < CURRENT; i++)); do
    w=\${words[i]}
    case $w in
${scanCases(m, '      (')}
      (-*) ;;
      (*) args+=("$w") ;;
    esac
  done
  local cmd=\${args[1]-} npos=$(( \${#args} > 0 ? \${#args} - 1 : 0 ))
  case $cmd in
    (${groupNames.join('|')}) if (( npos > 0 )); then cmd="$cmd \${args[2]}"; npos=$(( npos - 1 )); fi ;;
  esac

  # The value of a flag that takes one.
  case $prev in
${valueCases.join('\n')}
  esac

  if [[ $cur == -* ]]; then
    case $cmd in
${flagCases.join('\n')}
      (*) compadd -- ${[...m.globalFlags, '--version', '-V'].join(' ')} ;;
    esac
    return
  fi

  case $cmd in
    ('') local -a cmds=(${described(m.top, summary)}); _describe -t commands 'pxe-ctl command' cmds ;;
${groupCases.join('\n')}
    (help) case $npos in (0) compadd -- ${m.top.filter((w) => w !== 'help').join(' ')} ;; (1) case \${args[2]} in ${helpGroupCases} esac ;; esac ;;
${argCases.join('\n')}
  esac
}

if [[ \${funcstack[1]} == _pxe-ctl ]]; then
  _pxe-ctl "$@"
else
  compdef _pxe-ctl pxe-ctl
fi
`
}
