/** `<package>/discordjs`: a node's shards on @discordjs/ws (a peer dependency) under the controller. */
export { DiscordjsShards, DISCORDJS_DEFAULTS } from './discordjs-shards.js'
export type { DiscordjsShardsOptions, DispatchPayload, PassThroughOptions } from './discordjs-shards.js'
// The REST side of the same bot: a proxy its REST client points at, paced at the node's share (docs/rest-budget.md).
export { startRestProxy, RestProxyUnavailableError } from '../agent/index.js'
export type { RestProxy, RestProxyOptions } from '../agent/index.js'
