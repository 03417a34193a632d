/** `<package>/discordjs`: a node's shards on @discordjs/ws (a peer dependency) under the controller. */
export { DiscordjsShards, DISCORDJS_DEFAULTS } from './discordjs-shards.js'
export type { DiscordjsShardsOptions, DispatchPayload, PassThroughOptions } from './discordjs-shards.js'
