/** Plain-text rendering: aligned columns and key/value blocks, never colour (the output is the same on a pipe). */

/** Columns padded to their widest cell, two spaces apart; numeric columns (`right`) aligned right. */
export function renderTable(headers: readonly string[], rows: readonly (readonly string[])[], right: ReadonlySet<number> = new Set()): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (right.has(i) ? cell.padStart(widths[i]!) : i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd()
  return [line(headers), ...rows.map(line)].join('\n')
}

/** `key  value` lines with the keys padded to one width. */
export function renderPairs(pairs: readonly (readonly [string, string])[]): string {
  const width = Math.max(...pairs.map(([k]) => k.length))
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n')
}

/** An age as kubectl prints one: 3s, 4m12s, 2h5m, 3d4h. */
export function age(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? `${s % 60}s` : ''}`
  if (s < 86_400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60) ? `${Math.floor((s % 3600) / 60)}m` : ''}`
  return `${Math.floor(s / 86_400)}d${Math.floor((s % 86_400) / 3600) ? `${Math.floor((s % 86_400) / 3600)}h` : ''}`
}

/** A shard range as `first-last` (inclusive), `n` for one shard, `-` for none. */
export function shardRange(start: number, count: number): string {
  if (count === 0) return '-'
  return count === 1 ? String(start) : `${start}-${start + count - 1}`
}
