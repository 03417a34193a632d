/**
 * The runtime a fleet needs. Node 24 LTS is the production runtime; Node 20 still runs the controller
 * (package.json's engines) but is past its end of life (30 April 2026) and is much slower where it
 * counts: the same 10,000-node restart (`npm run bench:fleet -- --nodes 10000 --shards 65536
 * --capacity 8 --max-concurrency 16 --lease 30`) renewed every node 17.1 s after the kill on Node 24
 * and 38.6 s on Node 20, where 8,539 nodes passed their fail-safe (245 on Node 24). pxe-controller
 * says so once at start, through its logger, after its config loaded.
 */

/** The start's warning for the Node version `node` (process.versions.node), or null when it is a runtime we ship for. */
export function runtimeWarning(node: string): { readonly fields: Record<string, string>; readonly message: string } | null {
  const major = Number.parseInt(node, 10)
  if (!(major <= 20)) return null
  return {
    fields: { node, production_runtime: 'Node 24 LTS' },
    message: `Node ${node} is past its end of life (Node 20: 30 April 2026); run the controller on Node 24 LTS, the production runtime: a 10,000-node fleet restart renews every node about 2x slower on Node 20 (38.6 s against 17.1 s, with 8,539 nodes past their fail-safe)`,
  }
}
