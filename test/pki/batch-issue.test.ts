// Issue 11 item 4: `issue --names FILE` — one run, one lock, every name checked first, the index written once.
import t from 'tap'
import { spawn } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { initPki, issueBundle, issueBundles, readIndex } from '../../pki/toolkit.js'
import { fingerprint, modeOf, openssl } from './helpers.js'
import { cliEntry, REPO_ROOT, cliIn } from './run-cli.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const dir = join(root, 'pki')
const out = join(root, 'fleet')

t.before(() => initPki(dir))

const cli = (...args: string[]) => cliIn(dir, ...args)

const names = (prefix: string, count: number): string[] => Array.from({ length: count }, (_, i) => `${prefix}-${String(i).padStart(4, '0')}`)

async function namesFile(label: string, lines: readonly string[]): Promise<string> {
  const path = join(root, `${label}.txt`)
  await writeFile(path, `${lines.join('\n')}\n`)
  return path
}

t.test('a names file with comments and blank lines: one bundle per name, verified by OpenSSL, one index write', async (t) => {
  const wanted = names('rack1', 260)
  const file = await namesFile('rack1', ['# rack 1, row A', '', ...wanted.slice(0, 100), '   ', '# row B', ...wanted.slice(100).map((n) => `  ${n}\t`)])
  const historyBefore = (await readIndex(dir)).history.length
  const res = await cli('issue', '--names', file, '--role', 'node', '--key-type', 'ec', '--out', out, '--days', '30')
  t.equal(res.code, 0, res.err)
  t.match(res.out, new RegExp(`^issued 260 node bundles \\(EC P-256\\) into ${out.replaceAll('/', '\\/')} in [0-9.]+ s \\(\\d+/s\\)\\n$`))
  t.match(res.err, /^signed 260\/260 \(\d+\/s\)$/m, 'a final signing line')
  t.match(res.err, /^wrote 260\/260 \(\d+\/s\)$/m, 'a final writing line')
  t.ok(/^signed (\d+)\/260 /m.test(res.err.replace(/^signed 260\/260.*$/m, '')), 'progress before the end (every 250 bundles or every second)')
  t.notMatch(res.out + res.err, /PRIVATE KEY/)

  t.same((await readdir(out)).sort(), wanted, 'exactly one folder per name, no temporary folder left')
  t.equal(await modeOf(out), 0o700, 'the --out folder made here is 0700')
  const index = await readIndex(dir)
  t.equal(index.history.length, historyBefore + 1, 'one history line for the whole run')
  t.match(index.history.at(-1), { command: 'issue', detail: new RegExp(`^260 node bundles \\(EC P-256\\) from .*rack1\\.txt into ${out.replaceAll('/', '\\/')}$`) })
  const records = new Map(index.certs.map((c) => [c.serial, c]))
  for (const name of wanted) {
    const cert = new X509Certificate(await readFile(join(out, name, 'cert.pem')))
    t.match(records.get(cert.serialNumber.toLowerCase()), { name, role: 'node', command: 'issue' }, `${name} is in the index`)
    t.equal(cert.subject, `CN=${name}\nOU=node`)
  }
  t.equal(await modeOf(join(out, wanted[7]!, 'key.pem')), 0o600)
  t.equal(await modeOf(join(out, wanted[7]!)), 0o700)
  const verify = await openssl(['verify', '-x509_strict', '-purpose', 'sslclient', '-CAfile', join(dir, 'ca.pem'), ...wanted.slice(0, 40).map((n) => join(out, n, 'cert.pem'))])
  t.ok(verify.ok, verify.out)
  t.equal(verify.out.match(/: OK/g)?.length, 40)
})

t.test('any bad name stops the whole run before anything is written; the error names the line', async (t) => {
  await mkdir(join(out, 'stray-folder'))
  const file = (label: string, lines: string[]) => namesFile(label, lines)
  const cases: Array<[string, string[], number, RegExp, string?]> = [
    ['a name that breaks the rule', ['good-1', '# fine', 'a b', 'good-2'], 2, /bad-rule\.txt line 3: invalid name "a b": may contain only .*\(nothing was issued\)/],
    ['a name twice', ['good-1', 'good-2', '', 'good-1'], 2, /twice\.txt line 4: "good-1" is already listed on line 1 \(nothing was issued\)/],
    ['an existing bundle folder', ['good-1', 'stray-folder'], 1, /folder\.txt line 2: bundle .*stray-folder already exists; issue refuses to overwrite it/],
    ['a name with a valid certificate', ['good-1', 'good-2', 'rack1-0003'], 1, /valid\.txt line 3: "rack1-0003" already holds a valid certificate .*pass --replace/, join(root, 'fleet-b')],
    ['several problems: the first line is named, the count given', ['good-1', '-bad', 'rack1-0001', 'good-1'], 1, /several\.txt line 2: invalid name "-bad".*\(3 problems in all, the first shown; nothing was issued\)/],
    ['only comments', ['# nobody', ''], 1, /empty\.txt lists no name/],
  ]
  const labels = ['bad-rule', 'twice', 'folder', 'valid', 'several', 'empty']
  const outBefore = await fingerprint(out)
  for (const [i, [what, lines, code, message, outDir]] of cases.entries()) {
    const pkiBefore = await fingerprint(dir)
    const res = await cli('issue', '--names', await file(labels[i]!, lines), '--role', 'node', '--key-type', 'ec', '--out', outDir ?? out)
    t.equal(res.code, code, `${what}: exit code`)
    t.match(res.err, /^pxe-pki: error: [^\n]+\n$/, `${what}: one error line`)
    t.match(res.err, message, `${what}: message`)
    t.same(await fingerprint(dir), pkiBefore, `${what}: PKI unchanged`)
    if (outDir !== undefined) t.same(await readdir(root).then((e) => e.includes('fleet-b')), false, `${what}: no folder made`)
  }
  t.same(await fingerprint(out), outBefore, 'no bundle written by any of them')
  t.match(await cli('issue', 'node-1', '--names', join(root, 'rack1.txt'), '--role', 'node'), { code: 2, err: /unexpected argument "node-1" for "issue"/ })
  t.match(await cli('issue', '--names', join(root, 'missing.txt'), '--role', 'node'), { code: 1, err: /cannot read names file .*missing\.txt \(ENOENT\)/ })
  t.match((await cli('issue', '--help')).out, /--names FILE issues one bundle per line of FILE/)
})

t.test('--replace in a batch: bundles moved aside, replaced serials reported, old certificates still valid', async (t) => {
  const old = new Map((await readIndex(dir)).certs.filter((c) => ['rack1-0001', 'rack1-0002'].includes(c.name)).map((c) => [c.name, c.serial]))
  const res = await cli('issue', '--names', await namesFile('again', ['rack1-0001', 'rack1-0002', 'rack2-0001']), '--role', 'node', '--key-type', 'ec', '--out', out, '--replace')
  t.equal(res.code, 0, res.err)
  for (const [name, serial] of old) {
    t.match(res.out, new RegExp(`^${name}: replaces ${serial} .*revoke --serial ${serial}.*; old bundle moved to .*${name}\\.replaced-${serial}$`, 'm'))
    t.ok((await readdir(out)).includes(`${name}.replaced-${serial}`))
  }
  t.notMatch(res.out, /rack2-0001:/, 'a new name replaces nothing')
  t.match(res.out, /issued 3 node bundles/)
  const index = await readIndex(dir)
  t.ok(index.certs.filter((c) => old.has(c.name) && c.replaces !== undefined).every((c) => c.replaces![0] === old.get(c.name)))
  t.match(index.history.at(-1)?.detail, /; 2 replace valid certificates$/)
})

t.test('a write error in the middle: nothing is issued, bundles placed so far are taken back out', async (t) => {
  const batch = names('rack3', 40)
  const indexBefore = await readIndex(dir)
  const target = join(root, 'fleet-c')
  const blocker = join(target, batch[25]!)
  // Once every certificate is signed (before any write), a non-empty folder appears where bundle 26 goes.
  const onProgress = (phase: string, done: number, total: number): void => {
    if (phase === 'signed' && done === total) mkdirSync(join(blocker, 'someone-elses'), { recursive: true })
  }
  await t.rejects(
    issueBundles(dir, batch.map((name, i) => ({ name, line: i + 1 })), 'node', { keyType: 'ec', outDir: target, source: 'rack3.txt', onProgress }),
    new RegExp(`cannot write bundle ${blocker.replaceAll('/', '\\/')} \\(\\w+\\); nothing was issued`),
  )
  t.same(await readIndex(dir), indexBefore, 'the index is back as it was')
  t.same(await readdir(target), [batch[25]], 'no bundle and no temporary folder left (only the blocking folder)')
})

t.test('killed in the middle (SIGKILL): no bundle on disk is missing from the index', async (t) => {
  const batch = names('rack4', 400)
  const file = await namesFile('rack4', batch)
  const target = join(root, 'killed')
  const child = spawn(process.execPath, [await cliEntry(), 'issue', '--names', file, '--role', 'node', '--key-type', 'ec', '--out', target, '--dir', dir], { cwd: REPO_ROOT, stdio: 'ignore' })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  // Kill as soon as the first bundle is in place (or let it finish if it is faster than the polling).
  for (let i = 0; i < 1500 && child.exitCode === null; i++) {
    const entries = await readdir(target).catch(() => [])
    if (entries.some((e) => !e.startsWith('.'))) break
    await sleep(10)
  }
  child.kill('SIGKILL')
  await exited
  const serials = new Set((await readIndex(dir)).certs.map((c) => c.serial))
  const placed = (await readdir(target).catch(() => [] as string[])).filter((e) => !e.startsWith('.'))
  t.ok(placed.length > 0, `${placed.length} bundles were in place`)
  for (const name of placed) {
    const cert = new X509Certificate(await readFile(join(target, name, 'cert.pem')))
    t.ok(serials.has(cert.serialNumber.toLowerCase()), `${name}: its certificate is in the index`)
  }
})

t.test('issue <name> and issue --names share the checks', async (t) => {
  await t.rejects(issueBundle(dir, 'rack1-0005', 'node', { keyType: 'ec', outDir: join(root, 'other') }), /^Error: "rack1-0005" already holds a valid certificate|"rack1-0005" already holds a valid certificate/)
  await t.rejects(issueBundles(dir, [], 'node', { source: 'none.txt' }), /none\.txt lists no name/)
})
