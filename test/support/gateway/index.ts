/** The gateway emulator for tests, in one import: `import { startGatewayEmulator } from '../support/gateway/index.js'`. */
export { GatewayEmulator, startGatewayEmulator, type ShardSelector } from './gateway-emulator.js'
export type { GatewayEmulatorOptions, ResolvedOptions } from './emulator-options.js'
export type { Breach, GatewayStats, IdentifyRecord, ResumeRecord, ShardRef, Count } from './emulator-records.js'
export type { SessionState, SessionView, ProducedDispatch, EventRef } from './emulated-session.js'
export type { ConnectionView } from './gateway-connection.js'
export type { DeliveryReport, ReceivedEvent } from './delivery-check.js'
export { RawGatewayClient, type GatewayPayload } from './raw-gateway-client.js'
export { Close, Op } from './gateway-codes.js'
