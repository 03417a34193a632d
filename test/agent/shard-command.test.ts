// The CLI's shard commands and session handoff, run in-process: the start environment by mode, exit 75
// from a resuming start, a stop command's session on its last line of stdout (anything else is no
// session), and no session value in any log line or error.
import t from 'tap'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { ResumeRefusedError } from '../../src/agent/session.js'
import { runShardCommand } from '../../src/agent/shard-command.js'
import type { ShardContext, ShardStopContext } from '../../src/agent/shard-runner.js'

const SESSION = { sessionId: 'sEcReT0session0id', sequence: 4711, resumeUrl: 'wss://gateway-us-east1-b.discord.gg' }
const LINE = JSON.stringify({ session_id: SESSION.sessionId, sequence: SESSION.sequence, resume_url: SESSION.resumeUrl })
const info = { nodeId: 'node-a', shardId: 3, generation: 2, totalShards: 8, maxConcurrency: 8 }

function captured() {
  let text = ''
  const stream = new Writable({ write: (chunk: Buffer, _enc, done) => ((text += chunk.toString()), done()) })
  return { logger: pino({ level: 'debug' }, stream), text: () => text }
}

const start = (resume: typeof SESSION | null): ShardContext => ({ ...info, resume, signal: new AbortController().signal, claimFreshIdentify: async () => undefined, identifyGrantAgeMs: () => 0, serving: () => true })
const stop = (): ShardStopContext => ({ ...info, reason: 'plan', signal: new AbortController().signal, timeoutMs: 5000 })
const env = `echo "$PXE_START_MODE|\${PXE_RESUME_SESSION_ID-unset}|\${PXE_RESUME_SEQUENCE-unset}|\${PXE_RESUME_URL-unset}" >&2; exit 1`

t.test('a start command sees PXE_START_MODE, and the session for a resume', async (t) => {
  const log = captured()
  await t.rejects(runShardCommand(env, 'start', start(null), log.logger), /exited with status 1: identify\|unset\|unset\|unset$/)
  const resumed = await runShardCommand(env, 'start', start(SESSION), log.logger).catch((err: Error) => err.message)
  t.match(resumed, /exited with status 1: resume\|<session_id>\|4711\|wss:\/\/gateway-us-east1-b\.discord\.gg$/, 'every variable, the session ID masked in the error')
  t.notMatch(resumed, SESSION.sessionId)
})

t.test('exit 75 from a resuming start: ResumeRefusedError; from an identify start: an ordinary failure', async (t) => {
  const log = captured()
  await t.rejects(runShardCommand('exit 75', 'start', start(SESSION), log.logger), ResumeRefusedError)
  const identify = await runShardCommand('exit 75', 'start', start(null), log.logger).catch((err: unknown) => err)
  t.ok(identify instanceof Error && !(identify instanceof ResumeRefusedError))
  t.match((identify as Error).message, /the start command exited with status 75/)
})

t.test("a stop command's last line of stdout: the session, or nothing", async (t) => {
  const cases: [string, string, typeof SESSION | undefined][] = [
    ['the last line', `echo closing; echo '${LINE}'`, SESSION],
    ['with trailing blank lines', `echo '${LINE}'; echo; echo`, SESSION],
    ['stderr after it does not count', `echo '${LINE}'; echo noise >&2`, SESSION],
    ['a line after it', `echo '${LINE}'; echo done`, undefined],
    ['not JSON', `echo '{"session_id": '`, undefined],
    ['an unknown field', `echo '${JSON.stringify({ ...JSON.parse(LINE), shard_id: 3 })}'`, undefined],
    ['a bad session ID', `echo '${LINE.replace(SESSION.sessionId, 'not-valid')}'`, undefined],
    ['an https URL', `echo '${LINE.replace('wss:', 'https:')}'`, undefined],
    ['a JSON number', 'echo 42', undefined],
    ['nothing', 'true', undefined],
    ['on stderr only', `echo '${LINE}' >&2`, undefined],
  ]
  for (const [what, command, expected] of cases) {
    const log = captured()
    t.same(await runShardCommand(command, 'stop', stop(), log.logger), expected, what)
    t.notMatch(log.text(), SESSION.sessionId, `${what}: no session ID logged`)
  }
  const log = captured()
  await runShardCommand(`echo '${LINE.replace(SESSION.sessionId, 'not-valid')}'`, 'stop', stop(), log.logger)
  t.match(log.text(), /looks like a session but is not one/, 'a near miss is worth a warning')
  t.match(log.text(), /session_id must be 1 to 128 letters and digits/)
})

t.test('a failed stop command that printed a session: no session, and the error withholds the line', async (t) => {
  const log = captured()
  const err = await runShardCommand(`echo before; echo '${LINE}'; exit 3`, 'stop', stop(), log.logger).catch((e: Error) => e.message)
  t.match(err, /the stop command exited with status 3: before\n<line with a session withheld>/)
  t.notMatch(err, SESSION.sessionId)
})
