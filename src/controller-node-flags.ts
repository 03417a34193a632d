/**
 * The flags node runs the controller with. Every way this package starts it passes them: `npm start`,
 * the `pxe-controller` bin (its shebang), deploy/pxe-controller.service, deploy/Dockerfile,
 * deploy/ha-local.sh and the benchmarks; test/controller-node-flags.test.ts keeps those in step.
 *
 * `--single-threaded-gc`: V8 otherwise scavenges in parallel and marks concurrently on helper threads
 * (four, whatever the machine). Holding a fleet's TLS connections grows the old generation by about
 * 10 KB a connection (Node's socket, TLS and HTTP objects), so a 10,000-node cold join runs some thirty
 * mark-compact cycles. On the 2-core machine the issue targets, measured side by side over that cold
 * join (npm run bench:fleet): the helper threads spent 4.5–4.8 s of CPU; with this flag they spent
 * 0.8–0.9 s (compilation only) and the main thread 0.8 s more, so the process used 30.8 s instead of
 * 32.1–33.9 s, and the steady state 0.42–0.44 s of CPU a second instead of 0.48–0.52. Helper threads
 * that compete for the cores the event loop and the host need cost more than they save. On a machine
 * with cores to spare the flag costs that ~3 % of main-thread time; README "Node flags" says how to drop it.
 */
export const CONTROLLER_NODE_FLAGS: readonly string[] = ['--single-threaded-gc']

/** The flags of CONTROLLER_NODE_FLAGS this process was started without (empty when all are in force). */
export function missingNodeFlags(execArgv: readonly string[] = process.execArgv): string[] {
  return CONTROLLER_NODE_FLAGS.filter((flag) => !execArgv.includes(flag))
}
