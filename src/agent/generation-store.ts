/**
 * Where the agent keeps the last accepted plan generation across its own restarts, so that a plan
 * replayed after a restart is still refused. The file store writes atomically (temp file, fsync,
 * rename, fsync of the folder) with mode 0600 and validates what it reads back with zod.
 */
import { mkdir, readFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { z } from 'zod'
import { replaceFileAtomically } from '../state/durable-fs.js'

/** Keeps the last accepted generation. */
export interface GenerationStore {
  /** The stored generation, or null when none was stored yet. */
  load(): Promise<number | null>
  /** Stores a generation (only ever called with a higher one). */
  save(generation: number): Promise<void>
}

/** Keeps the generation in memory only (lost when the process ends). */
export class MemoryGenerationStore implements GenerationStore {
  private generation: number | null = null

  async load(): Promise<number | null> {
    return this.generation
  }

  async save(generation: number): Promise<void> {
    this.generation = generation
  }
}

/** The state file's content. */
export const stateFileSchema = z
  .object({
    version: z.literal(1),
    node_id: z.string().min(1).max(64),
    generation: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    saved_at: z.string().datetime(),
  })
  .strict()

/** Thrown when the state file cannot be read or is not ours; the agent refuses to start on it. */
export class StateFileError extends Error {
  override readonly name = 'StateFileError'
}

/** A JSON file `{version, node_id, generation, saved_at}` for one node. */
export class FileGenerationStore implements GenerationStore {
  constructor(private readonly path: string, private readonly nodeId: string) {}

  async load(): Promise<number | null> {
    let text: string
    try {
      text = await readFile(this.path, 'utf8')
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
      throw new StateFileError(`cannot read state file ${this.path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
    }
    let raw: unknown
    try {
      raw = JSON.parse(text)
    } catch {
      throw new StateFileError(`state file ${this.path} is not JSON; move it away to start without a rollback floor`)
    }
    const parsed = stateFileSchema.safeParse(raw)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw new StateFileError(`state file ${this.path} is not a node state file (${issue?.path.join('.') || 'root'}: ${issue?.message ?? 'invalid'})`)
    }
    if (parsed.data.node_id !== this.nodeId) {
      throw new StateFileError(`state file ${this.path} belongs to node ${parsed.data.node_id}, not ${this.nodeId}`)
    }
    return parsed.data.generation
  }

  async save(generation: number): Promise<void> {
    const dir = dirname(this.path)
    await mkdir(dir, { recursive: true, mode: 0o700 })
    const data = JSON.stringify({ version: 1, node_id: this.nodeId, generation, saved_at: new Date().toISOString() }) + '\n'
    replaceFileAtomically(this.path, dir, data, 0o600)
  }
}
