/** Reads samples out of Prometheus text, as a scraper would. */

/** The value of one series (`name` or `name{label="v",...}` exactly as exposed), or undefined when absent. */
export function sample(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line === '') continue
    const space = line.lastIndexOf(' ')
    if (line.slice(0, space) === series) return Number(line.slice(space + 1))
  }
  return undefined
}

/** Every metric name the text declares (its `# TYPE` lines). */
export function metricNames(text: string): string[] {
  return text.split('\n').filter((l) => l.startsWith('# TYPE ')).map((l) => l.split(' ')[2]!)
}
