/**
 * Discord gateway numbers the emulator speaks: opcodes, close codes and intent bits, as
 * discord-api-docs lists them (developers/topics/opcodes-and-status-codes.mdx, "Gateway Opcodes" and
 * "Gateway Close Event Codes"; developers/events/gateway.mdx, "List of Intents").
 */

/** Gateway opcodes. */
export const Op = {
  Dispatch: 0,
  Heartbeat: 1,
  Identify: 2,
  PresenceUpdate: 3,
  VoiceStateUpdate: 4,
  Resume: 6,
  Reconnect: 7,
  RequestGuildMembers: 8,
  InvalidSession: 9,
  Hello: 10,
  HeartbeatAck: 11,
  RequestSoundboardSounds: 31,
  RequestChannelInfo: 43,
} as const

/** Opcodes a client may send (anything else closes with 4001). */
export const CLIENT_OPS: ReadonlySet<number> = new Set([
  Op.Heartbeat,
  Op.Identify,
  Op.PresenceUpdate,
  Op.VoiceStateUpdate,
  Op.Resume,
  Op.RequestGuildMembers,
  Op.RequestSoundboardSounds,
  Op.RequestChannelInfo,
])

/** Gateway close codes (plus the WebSocket ones that decide whether a session survives). */
export const Close = {
  Normal: 1000,
  GoingAway: 1001,
  Abnormal: 1006,
  UnknownError: 4000,
  UnknownOpcode: 4001,
  DecodeError: 4002,
  NotAuthenticated: 4003,
  AuthenticationFailed: 4004,
  AlreadyAuthenticated: 4005,
  InvalidSeq: 4007,
  RateLimited: 4008,
  SessionTimedOut: 4009,
  InvalidShard: 4010,
  ShardingRequired: 4011,
  InvalidApiVersion: 4012,
  InvalidIntents: 4013,
  DisallowedIntents: 4014,
} as const

/** "When you close the connection to the gateway with close code 1000 or 1001, your session will be invalidated." */
export function closeEndsSession(code: number): boolean {
  return code === Close.Normal || code === Close.GoingAway
}

/** The privileged intents: GUILD_MEMBERS (1 << 1), GUILD_PRESENCES (1 << 8), MESSAGE_CONTENT (1 << 15). */
export const PRIVILEGED_INTENTS = (1 << 1) | (1 << 8) | (1 << 15)

/** Every intent bit the docs list: 0..16, 20, 21, 24, 25. Any other bit is an invalid intent (4013). */
export const KNOWN_INTENTS = (() => {
  let mask = 0
  for (const bit of [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20, 21, 24, 25]) mask |= 1 << bit
  return mask
})()

/** The API version the emulator serves (the `v` query parameter; anything else closes with 4012). */
export const API_VERSION = '10'

/** "Event payloads ... must not exceed 4096 bytes" (gateway.mdx, "Sending Events"), else 4002. */
export const MAX_CLIENT_PAYLOAD_BYTES = 4096

/**
 * Whether a close the server sends ends the session. The codes the docs mark "Reconnect: false", 4007
 * ("Reconnect and start a new session") and 1000/1001 end it; the others (4000, 4001, 4002, 4003, 4005,
 * 4008, 4009) leave it resumable, as "It's disconnected with a close code that indicates it can reconnect".
 */
export function serverCloseEndsSession(code: number): boolean {
  return closeEndsSession(code) || [4004, 4007, 4010, 4011, 4012, 4013, 4014].includes(code)
}
