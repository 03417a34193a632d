/**
 * The enrollment queue in the state directory (the file backend's EnrollStore): one checksummed snapshot
 * file, `enroll-requests.json` (0600, with the previous good copy beside it), rewritten whole on each
 * write. The service groups the changes of one event-loop turn into one write, so a boot storm of a
 * thousand requests is a few hundred writes of at most a few MB, not one per request.
 */
import { z } from 'zod'
import { storedEnrollSchema, type EnrollStore, type StoredEnroll } from '../core/enroll-record.js'
import { SnapshotFile } from './snapshot-file.js'

export const ENROLL_FILE = 'enroll-requests.json'

const enrollFileSchema = z
  .object({
    format: z.literal('pxe-enroll-requests'),
    version: z.literal(1),
    requests: z.array(storedEnrollSchema).max(20_000),
  })
  .strict()
type EnrollFile = z.infer<typeof enrollFileSchema>

/** The queue's store in `stateDir`. */
export class EnrollFileStore implements EnrollStore {
  private readonly file: SnapshotFile<EnrollFile>
  private readonly records = new Map<string, StoredEnroll>()

  constructor(stateDir: string) {
    this.file = new SnapshotFile(stateDir, enrollFileSchema, { fileName: ENROLL_FILE, validateOnSave: false })
  }

  /** The requests kept; a damaged file stops the start (StateFileError), as the state's own does. */
  async load(): Promise<StoredEnroll[]> {
    const saved = await this.file.load()
    this.records.clear()
    for (const record of saved?.requests ?? []) this.records.set(record.id, record)
    return [...this.records.values()]
  }

  async write(put: readonly StoredEnroll[], deleted: readonly string[]): Promise<void> {
    const next = new Map(this.records)
    for (const id of deleted) next.delete(id)
    for (const record of put) next.set(record.id, record)
    await this.file.save({ format: 'pxe-enroll-requests', version: 1, requests: [...next.values()] })
    this.records.clear()
    for (const [id, record] of next) this.records.set(id, record)
  }
}
