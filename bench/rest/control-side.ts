/**
 * The control: four independent @discordjs/rest clients with their default options, each believing it
 * has the bot's whole 50/s, pointed straight at the emulator. No controller, no proxy. Each names itself
 * in the emulator's client header, so that its invalid requests are counted as its own (on Discord each
 * machine would be its own IP address).
 */
import type { GatewayEmulator } from '../../test/support/gateway/gateway-emulator.js'
import { IN_FLIGHT_SECONDS, inFlightBound, LoadBot } from './load-bot.js'
import type { BotPlan } from './schedule.js'
import type { ScenarioSide } from './scenario-run.js'

/** The emulator's default client header (test/support/gateway/rest-options.ts). */
export const CLIENT_HEADER = 'x-emulator-client'

/** The control side of the scenario on emulator `e`; `inFlightSeconds`: each bot's in-flight bound in seconds of its demand. */
export function controlSide(e: GatewayEmulator, inFlightSeconds = IN_FLIGHT_SECONDS): ScenarioSide {
  return {
    label: 'control',
    addNode: async (plan: BotPlan, index: number) =>
      new LoadBot({ name: plan.name, api: e.apiUrl, token: e.token, perSecond: plan.perSecond, maxInFlight: inFlightBound(plan.perSecond, inFlightSeconds), rest: { headers: { [CLIENT_HEADER]: plan.name } } }, index),
    removeNode: async () => {},
    sample: () => [],
    close: async () => {},
  }
}
