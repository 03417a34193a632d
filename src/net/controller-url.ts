/** What a controller base URL may be: the node agent and pxe-ctl hold their URLs to the same rule. */

/** Why `url` is not a controller base URL (https://host[:port] and nothing else), or null. */
export function controllerUrlProblem(url: string): string | null {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return 'is not a URL'
  }
  if (parsed.protocol !== 'https:') return 'must use https (the controller speaks mutual TLS only)'
  if (parsed.username !== '' || parsed.password !== '') return 'must not carry credentials'
  if (parsed.pathname !== '/' || parsed.search !== '' || parsed.hash !== '') return 'must be a base URL without a path, query or fragment'
  return null
}
