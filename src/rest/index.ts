/** The REST proxy (SPEC "REST budget"): a node's REST requests to Discord, paced at its share. */
export { startRestProxy, REST_PROXY_DEFAULTS } from './rest-proxy.js'
export type { RestProxy, RestProxyOptions, RestDemand } from './proxy-options.js'
export { RestProxyUnavailableError } from './proxy-errors.js'
export { parseListenAddress, upstreamProblem } from './listen-address.js'
export type { ListenAddress } from './listen-address.js'
export type { RestShare, RestShareGrant } from './share.js'
export type { RestClock } from './rest-clock.js'
