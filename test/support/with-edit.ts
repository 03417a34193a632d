/** Test helper for config cases: a deep copy of an object with one dotted key removed or replaced. */

/** A copy of `base` with the key at dotted `path` removed (absent, as in a JSON file), or set to `value`. */
export function withEdit<T extends object>(base: T, path: string, ...value: [unknown?]): Record<string, unknown> {
  const copy = structuredClone(base) as Record<string, any>
  const keys = path.split('.')
  const last = keys.pop()!
  const parent = keys.reduce((o, k) => o[k], copy)
  if (value.length === 0) delete parent[last]
  else parent[last] = value[0]
  return copy
}
