// Every relative link in the user docs resolves: the file or folder exists, and a #anchor names a
// heading of the target page (GitHub's slugs). The manual is many small pages that link to each other
// instead of repeating facts, so a renamed heading or a moved page must fail here, not in a reader's
// browser.
import t from 'tap'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')

/** The pages whose links are checked: the top-level docs, the manual, the runbook pointer, bench's docs. */
function pages(): string[] {
  const top = ['README.md', 'SECURITY.md', 'CHANGELOG.md', 'deploy/RUNBOOK.md', 'bench/README.md', 'bench/RESULTS.md']
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`)
  return [...top, ...docs].map((path) => join(ROOT, path))
}

/** The text outside fenced code blocks and inline code spans, where a link is a link. */
function proseOf(markdown: string): string {
  let inFence = false
  const lines: string[] = []
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) {
      inFence = !inFence
      lines.push('')
      continue
    }
    lines.push(inFence ? '' : line.replace(/`[^`]*`/g, ''))
  }
  return lines.join('\n')
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slugOf(heading: string): string {
  return heading
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

/** Every anchor a page offers, with GitHub's -1, -2 suffixes for repeated headings. */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  let inFence = false
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) inFence = !inFence
    const m = inFence ? null : /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line)
    if (!m) continue
    const base = slugOf(m[1]!)
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    anchors.add(count === 0 ? base : `${base}-${count}`)
  }
  return anchors
}

/** The targets of inline links `[text](target)` in a page's prose. */
function linkTargets(markdown: string): string[] {
  return [...proseOf(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!)
}

/** What is wrong with one link of `page`, or null when it resolves. */
function problemOf(page: string, target: string): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null // http:, https:, mailto: — not ours to check offline
  const [pathPart, anchor] = target.split('#', 2) as [string, string | undefined]
  const file = pathPart === '' ? page : resolve(dirname(page), decodeURIComponent(pathPart))
  if (!file.startsWith(ROOT)) return `${target}: points outside the repository`
  if (!existsSync(file)) return `${target}: ${relative(ROOT, file)} does not exist`
  if (anchor === undefined) return null
  if (statSync(file).isDirectory() || !file.endsWith('.md')) return `${target}: an anchor into something that is not a Markdown page`
  if (!anchorsOf(readFileSync(file, 'utf8')).has(anchor)) return `${target}: ${relative(ROOT, file)} has no heading #${anchor}`
  return null
}

t.test('GitHub slugs, as the links below rely on', async (t) => {
  t.equal(slugOf('Running `pxe-node`'), 'running-pxe-node')
  t.equal(slugOf('Restoring an older `state_dir` (or losing it)'), 'restoring-an-older-state_dir-or-losing-it')
  t.equal(slugOf("Create the CA and the controller's files"), 'create-the-ca-and-the-controllers-files')
  t.same([...anchorsOf('# A\n## B\n```\n# not a heading\n```\n## B\n')], ['a', 'b', 'b-1'])
  t.same(linkTargets('[x](a.md#b) `[y](not-a-link.md)`\n```\n[z](fenced.md)\n```\n[w](https://e.org)'), ['a.md#b', 'https://e.org'])
})

t.test('every relative link and anchor in the user docs resolves', async (t) => {
  const list = pages()
  t.ok(list.length > 10, 'the manual has its pages')
  for (const page of list) {
    t.ok(existsSync(page), `${relative(ROOT, page)} exists`)
    const problems = linkTargets(readFileSync(page, 'utf8'))
      .map((target) => problemOf(page, target))
      .filter((p): p is string => p !== null)
    t.same(problems, [], relative(ROOT, page))
  }
})

t.test('the user docs stand alone: no path into the contract folder outside the repository', async (t) => {
  for (const page of pages()) {
    const text = readFileSync(page, 'utf8')
    t.notOk(/\.\.\/shared|SPEC\.md/.test(text), `${relative(ROOT, page)} names no file outside the repository`)
  }
})

t.test('the README stays a front page with both quick-start commands', async (t) => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
  t.ok(readme.split('\n').length <= 300, 'at most about 300 lines')
  t.match(readme, '`npm ci && npm start`')
  t.match(readme, '`npm ci && npm test`')
})
