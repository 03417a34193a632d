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
        'Inspect it, restore a good copy by hand if appropriate, then start again.',
    )
    this.name = 'StateFileError'
  }
}
