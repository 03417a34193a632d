/** `pxe-ctl watch`: the status and node table, refreshed until SIGINT. */
import { seconds, stringFlag } from '../args.js'
import type { CommandSpec } from '../command.js'
import { CtlError } from '../errors.js'
import { renderNodes, renderStatus } from '../views.js'

const DEFAULT_INTERVAL_S = 2
const CLEAR_SCREEN = '\x1b[H\x1b[2J'

export const watch: CommandSpec = {
  words: 'watch',
  usage: '[--interval S]',
  summary: 'status and nodes, refreshed every few seconds until Ctrl-C',
  details: `Reads GET /v1/plan every S seconds and prints the status block and the node table. On a terminal the
screen is cleared before each refresh; on a pipe each refresh starts with a "--- <time>" line. With -o json
one plan per line (JSON Lines). A refresh that fails prints the error on stderr and the watch goes on
(a controller fail-over shows up as such). Ctrl-C (SIGINT) or SIGTERM ends it with exit status 0.`,
  args: [],
  flags: [{ name: 'interval', value: 'S', help: `seconds between refreshes, 0.2..3600 (default ${DEFAULT_INTERVAL_S})` }],
  async run(ctx, parsed) {
    const flag = stringFlag(parsed, 'interval')
    const intervalMs = Math.round((flag === undefined ? DEFAULT_INTERVAL_S : seconds('--interval', flag, 0.2, 3600, 'watch')) * 1000)
    ctx.trapInterrupts() // a Ctrl-C during the first request ends the watch cleanly too
    const api = await ctx.api()
    while (!ctx.interrupted()) {
      try {
        const plan = await api.plan()
        const now = ctx.now()
        if (ctx.global.output === 'json') ctx.io.out(JSON.stringify(plan.raw))
        else {
          const head = ctx.io.isTTY ? `${CLEAR_SCREEN}every ${intervalMs / 1000}s, ${new Date(now).toISOString()}` : `--- ${new Date(now).toISOString()}`
          ctx.io.out(`${head}\n${renderStatus(plan.value, plan.controller, now)}\n\n${renderNodes(plan.value, now)}`)
        }
      } catch (err) {
        if (!(err instanceof CtlError)) throw err
        if (ctx.interrupted()) break // Ctrl-C during a request: the watch ends as usual, no error
        ctx.io.err(`pxe-ctl: ${new Date(ctx.now()).toISOString()}: ${err.message}`)
      }
      if (!(await ctx.sleep(intervalMs))) break
    }
  },
}
