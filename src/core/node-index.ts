/** Small integer IDs for node names, so that per-shard tables can be typed arrays (fast to fill and diff). */

/** Sentinel for "no node" in per-shard tables. */
export const NO_NODE = -1

/** Name ↔ integer ID; IDs are reused after release, so the tables stay as small as the live set. */
export class NodeIndex {
  private readonly ids = new Map<string, number>()
  private readonly names: string[] = []
  private readonly free: number[] = []

  /** The ID of `name`, assigned on first use. */
  idOf(name: string): number {
    let id = this.ids.get(name)
    if (id === undefined) {
      id = this.free.pop() ?? this.names.length
      this.ids.set(name, id)
      this.names[id] = name
    }
    return id
  }

  /** The ID of `name` if it has one. */
  find(name: string): number | undefined {
    return this.ids.get(name)
  }

  /** The name behind an ID, or null for NO_NODE. */
  nameOf(id: number): string | null {
    return id === NO_NODE ? null : (this.names[id] ?? null)
  }

  /** One more than the highest ID ever handed out (the size for per-ID tables). */
  get size(): number {
    return this.names.length
  }

  /** Frees the ID of `name`; the caller guarantees no table refers to it any more. */
  release(name: string): void {
    const id = this.ids.get(name)
    if (id === undefined) return
    this.ids.delete(name)
    this.free.push(id)
  }
}
