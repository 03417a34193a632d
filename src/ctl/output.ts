/** One result, in the format asked for: text for people, JSON (pretty, one document) for scripts. */
import type { RunContext } from './command.js'

export function emit(ctx: RunContext, json: unknown, text: () => string): void {
  if (ctx.global.output === 'json') ctx.io.out(JSON.stringify(json, null, 2))
  else ctx.io.out(text())
}

/** A warning on stderr (never on stdout, which scripts parse). */
export function warn(ctx: RunContext, text: string): void {
  ctx.io.err(`pxe-ctl: warning: ${text}`)
}
