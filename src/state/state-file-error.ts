/** The error that stops a start on a damaged state file, saying where the previous good copy is. */

/** A state file that cannot be used; the file itself is never modified, deleted or replaced. */
export class StateFileError extends Error {
  readonly code = 'state_file_invalid'
  constructor(
    readonly path: string,
    readonly problem: string,
    readonly prevPath: string,
    prevExists: boolean,
  ) {
    const prev = prevExists
      ? `The previous good copy is at ${prevPath}.`
      : `There is no previous copy (${prevPath} does not exist).`
    super(
      `state file ${path} is unusable: ${problem}. It was left exactly as it is. ${prev} ` +
        'A copy restored by hand (or no state at all) may hold a lower generation than the nodes last applied: ' +
        'every such node then refuses its plans as a rollback, its check-ins are refused with 400, and it stops its shards ' +
        'within one lease and stays locked out until its agent is restarted without its --state-file ' +
        '(docs/backup-and-restore.md, "Restoring an older state_dir"). Inspect the file, restore a copy only if you accept that, then start again.',
    )
    this.name = 'StateFileError'
  }
}
