/**
 * "did you mean" for mistyped commands and flags (`drian` → drain, `--dryrun` → --dry-run): the
 * nearest known word by Damerau-Levenshtein distance (the restricted kind, "optimal string alignment":
 * a swap of two neighbours counts as one edit, the commonest typo), or the one word the input begins.
 */

/** Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`. */
export function editDistance(a: string, b: string): number {
  // d[i][j]: the distance between a's first i and b's first j characters.
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)))
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1)
      d[i]![j] = best
    }
  }
  return d[a.length]![b.length]!
}

/**
 * The known word closest to `input`, or null when none is close: at most one edit for an input of up
 * to three characters (two edits there would suggest nearly anything), two for a longer one; failing
 * that, the only known word that `input` (two characters or more) begins. A tie goes to the word listed
 * first, so the caller orders `known` as its help does.
 */
export function didYouMean(input: string, known: readonly string[]): string | null {
  const limit = input.length <= 3 ? 1 : 2
  let best: string | null = null
  let bestDistance = limit + 1
  for (const word of known) {
    if (word === input) continue
    const distance = editDistance(input.toLowerCase(), word.toLowerCase())
    if (distance < bestDistance) [best, bestDistance] = [word, distance]
  }
  if (best !== null) return best
  const prefixed = input.length >= 2 ? known.filter((word) => word.startsWith(input)) : []
  return prefixed.length === 1 ? prefixed[0]! : null
}

/** `; did you mean "drain"?` (quoted as `quote` renders a word), or '' when nothing is close. */
export function suggestion(input: string, known: readonly string[], quote: (word: string) => string = (word) => `"${word}"`): string {
  const near = didYouMean(input, known)
  return near === null ? '' : `; did you mean ${quote(near)}?`
}
