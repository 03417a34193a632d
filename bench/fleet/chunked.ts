/** Runs an async function over many items a chunk at a time (10,000 files opened at once hit EMFILE). */
export async function mapChunked<T, R>(items: readonly T[], chunk: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = []
  for (let i = 0; i < items.length; i += chunk) out.push(...(await Promise.all(items.slice(i, i + chunk).map(fn))))
  return out
}
