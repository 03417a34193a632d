/**
 * The node side of the Discord-PXE protocol, as a library: `import { NodeAgent } from '<package>/agent'`.
 * See README.md, section "Node agent", for a usage example.
 */
export { NodeAgent } from './node-agent.js'
export type { AgentState, AgentStatus, AgentEnd } from './agent-status.js'
export type { NodeAgentOptions, ShardHealth } from './agent-options.js'
export { AGENT_DEFAULTS, controllerUrlProblem } from './agent-options.js'
export type { AgentEvent, HaltReason, RefusalReason } from './agent-events.js'
export type { ShardCallbacks, ShardContext, ShardStopContext, StopReason } from './shard-runner.js'
export type { ClaimOutcome } from './claim-scheduler.js'
export type { AuthorityLoss } from './plan-manager.js'
export { loadBundle, loadBundleJwks, identityFromPem, IdentityError, BUNDLE_FILE_NAMES } from './identity.js'
export type { NodeIdentity, IdentityMaterial } from './identity.js'
export { PinnedKeys, PinnedKeysError, planJwksSchema } from './pinned-keys.js'
export type { PlanJwks } from './pinned-keys.js'
export { verifyPlanToken, PLAN_REFUSAL_REASONS, PLAN_TYP } from './plan-verifier.js'
export type { PlanVerdict, PlanRefusalReason, VerifyContext } from './plan-verifier.js'
export type { PlanClaims } from './plan-claims.js'
export { FileGenerationStore, MemoryGenerationStore, StateFileError } from './generation-store.js'
export type { GenerationStore } from './generation-store.js'
export { systemClock } from './clock.js'
export type { AgentClock, TimerHandle } from './clock.js'
