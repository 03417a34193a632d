/**
 * The product: each node is a real NodeAgent (the library, as a host embeds it) checking in with a real
 * controller over mTLS, with a REST proxy (startRestProxy, the library equivalent of `pxe-node
 * --rest-proxy`) given as its `restProxy`; the node's bot (@discordjs/rest, default options, believing it
 * has the whole 50/s) points at its proxy, and the proxy's upstream is the emulator (through a client tap
 * that names the node, client-tap.ts). The agents run no gateway shards: this scenario is about REST.
 * Every share the agent gives its proxy is recorded with its time, to judge each node's sending against
 * the share it held.
 */
import type { NodeIdentity } from '../../src/agent/identity.js'
import { NodeAgent } from '../../src/agent/node-agent.js'
import type { RestProxyLink } from '../../src/agent/rest-share.js'
import { startRestProxy, type RestProxy, type RestShareGrant } from '../../src/rest/index.js'
import type { GatewayEmulator } from '../../test/support/gateway/gateway-emulator.js'
import { startClientTap, type ClientTap } from './client-tap.js'
import { IN_FLIGHT_SECONDS, inFlightBound, LoadBot } from './load-bot.js'
import type { BotPlan } from './schedule.js'
import type { ScenarioSide } from './scenario-run.js'

/** One share given to a node's proxy: from `atMs` (performance.now()) on, until `untilMs` at the latest. */
export interface ShareChange {
  readonly node: string
  readonly atMs: number
  /** Requests per second (0: none). */
  readonly perSecond: number
  readonly untilMs: number
}

/** What the product side needs. */
export interface ProductSideOptions {
  readonly emulator: GatewayEmulator
  /** The controller's base URLs (https://127.0.0.1:PORT). */
  readonly controllers: readonly string[]
  /** Each node's identity, by the bot's name (the node ID is the certificate's). */
  readonly identities: ReadonlyMap<string, NodeIdentity>
  /** The controller's identify_interval_ms. */
  readonly identifyIntervalMs: number
  /** Each bot's in-flight bound in seconds of its demand (default IN_FLIGHT_SECONDS). */
  readonly inFlightSeconds?: number
}

interface ProductNode {
  readonly agent: NodeAgent
  readonly proxy: RestProxy
  readonly tap: ClientTap
  left: boolean
}

/** The product side plus the record of every share each proxy was given. */
export interface ProductSide extends ScenarioSide {
  readonly shareChanges: readonly ShareChange[]
}

/** The product side of the scenario. */
export function productSide(opts: ProductSideOptions): ProductSide {
  const nodes = new Map<string, ProductNode>()
  const shareChanges: ShareChange[] = []
  // What each node's last check-in reported. Read through the link, never asked of the proxy apart: its
  // demand() counts the requests it holds at each call, so that another caller would change the next report.
  const lastDemand = new Map<string, number>()
  return {
    label: 'product',
    shareChanges,
    async addNode(plan: BotPlan, index: number): Promise<LoadBot> {
      const identity = opts.identities.get(plan.name)
      if (identity === undefined) throw new Error(`no identity for node ${plan.name}`)
      const tap = await startClientTap(plan.name, opts.emulator.port)
      const proxy = await startRestProxy({ upstream: tap.url })
      const link: RestProxyLink = {
        setShare(grant: RestShareGrant | null) {
          const atMs = performance.now()
          shareChanges.push({ node: plan.name, atMs, perSecond: grant?.perSecond ?? 0, untilMs: grant === null ? atMs : atMs + grant.validForMs })
          proxy.setShare(grant)
        },
        demand: (windowMs) => {
          const demand = proxy.demand(windowMs)
          lastDemand.set(plan.name, demand.perSecond)
          return demand
        },
        registerMetrics: (registry) => proxy.registerMetrics(registry),
      }
      const agent = new NodeAgent({
        identity,
        controllers: opts.controllers,
        capacity: 4,
        identifyIntervalMs: opts.identifyIntervalMs,
        restProxy: link,
        onStart: () => {},
        onStop: () => {},
      })
      nodes.set(plan.name, { agent, proxy, tap, left: false })
      await agent.start()
      const maxInFlight = inFlightBound(plan.perSecond, opts.inFlightSeconds ?? IN_FLIGHT_SECONDS)
      return new LoadBot({ name: plan.name, api: proxy.url, token: opts.emulator.token, perSecond: plan.perSecond, maxInFlight }, index)
    },
    async removeNode(name: string): Promise<void> {
      const node = nodes.get(name)
      if (node === undefined) return
      node.left = true
      await node.agent.leave()
      await node.proxy.close()
      await node.tap.close()
    },
    sample() {
      const out: { node: string; share: number; demand: number }[] = []
      for (const [name, node] of nodes) {
        if (node.left) continue
        out.push({ node: name, share: node.proxy.share()?.perSecond ?? 0, demand: lastDemand.get(name) ?? 0 })
      }
      return out
    },
    async close() {
      await Promise.all(
        [...nodes.values()].filter((n) => !n.left).map(async (n) => {
          n.left = true
          await n.agent.stop()
          await n.proxy.close()
          await n.tap.close()
        }),
      )
    },
  }
}
