/**
 * Loads @discordjs/rest, an optional peer dependency: the controller and the agent run without it, and
 * only a node that runs the REST proxy needs it.
 */
import type * as DiscordRest from '@discordjs/rest'
import { RestProxyUnavailableError } from './proxy-errors.js'

/** The module, as the proxy uses it. */
export type DiscordRestModule = typeof DiscordRest

/** The version range the proxy is built and tested against (package.json peerDependencies). */
export const DISCORD_REST_RANGE = '~2.6.3'

/** Imports @discordjs/rest; `importer` is the dynamic import (replaceable to test the message). */
export async function loadDiscordRest(importer: (name: string) => Promise<unknown> = (name) => import(name)): Promise<DiscordRestModule> {
  try {
    const mod = (await importer('@discordjs/rest')) as DiscordRestModule
    if (typeof mod.REST !== 'function') throw new Error('it exports no REST class')
    return mod
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    const why = code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND' ? 'it is not installed' : `it cannot be loaded (${err instanceof Error ? err.message.slice(0, 200) : String(err)})`
    throw new RestProxyUnavailableError(`the REST proxy needs the optional peer dependency @discordjs/rest (${DISCORD_REST_RANGE}), but ${why}: run "npm install @discordjs/rest@${DISCORD_REST_RANGE}" where this package is installed`)
  }
}
