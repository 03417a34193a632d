// One Identify claim against canned answers: the body (with fresh), grants as identify or resume (the
// session beside the outcome, never in it), an older controller's grant without mode, and answers that
// are not the SPEC's shape.
import t from 'tap'
import type { ControllerClient, ControllerReply } from '../../src/agent/controller-client.js'
import { claimIdentify } from '../../src/agent/identify-claim.js'

/** A client whose every POST is answered 200 with `body`; the bodies sent are recorded. */
function stub(body: unknown) {
  const sent: unknown[] = []
  const client = {
    post: async (_path: string, payload: unknown): Promise<ControllerReply> => {
      sent.push(payload)
      return { status: 200, body, errorCode: null, errorMessage: null, retryAfterMs: null, refusedShardId: null, url: 'https://c' }
    },
  } as unknown as ControllerClient
  return { client, sent }
}

const grant = { granted: true, shard_id: 3, bucket: 3, generation: 7 }
const session = { session_id: 'abc123', sequence: 42, resume_url: 'wss://gateway-us-east1-b.discord.gg' }

t.test('the body carries fresh only for a fresh claim', async (t) => {
  const s = stub({ ...grant, mode: 'identify' })
  await claimIdentify(s.client, 'node-a', 3)
  await claimIdentify(s.client, 'node-a', 3, true)
  t.same(s.sent, [{ node_id: 'node-a', shard_id: 3 }, { node_id: 'node-a', shard_id: 3, fresh: true }])
})

t.test('grants: identify, resume with the session beside the outcome, and an older controller without mode', async (t) => {
  t.same(await claimIdentify(stub({ ...grant, mode: 'identify' }).client, 'node-a', 3), { outcome: { kind: 'granted', generation: 7, mode: 'identify' }, resume: null })
  t.same(await claimIdentify(stub(grant).client, 'node-a', 3), { outcome: { kind: 'granted', generation: 7, mode: 'identify' }, resume: null }, 'no mode: identify')
  const resumed = await claimIdentify(stub({ ...grant, mode: 'resume', session }).client, 'node-a', 3)
  t.same(resumed, { outcome: { kind: 'granted', generation: 7, mode: 'resume' }, resume: { sessionId: 'abc123', sequence: 42, resumeUrl: 'wss://gateway-us-east1-b.discord.gg' } })
  t.notMatch(JSON.stringify(resumed.outcome), /abc123/, 'the outcome (which events carry) holds no session')
})

t.test('refused shapes fail the claim (it is retried), and a fresh claim never takes a resume', async (t) => {
  const cases: [string, unknown][] = [
    ['resume without a session', { ...grant, mode: 'resume' }],
    ['identify with a session', { ...grant, mode: 'identify', session }],
    ['an unknown mode', { ...grant, mode: 'replay' }],
    ['a session with an unknown field', { ...grant, mode: 'resume', session: { ...session, shard_id: 3 } }],
    ['a bad session ID', { ...grant, mode: 'resume', session: { ...session, session_id: 'a-b' } }],
    ['a session with an http URL', { ...grant, mode: 'resume', session: { ...session, resume_url: 'https://x.discord.gg' } }],
  ]
  for (const [what, body] of cases) {
    const reply = await claimIdentify(stub(body).client, 'node-a', 3)
    t.same(reply, { outcome: { kind: 'failed', detail: "the identify answer is not the SPEC's shape" }, resume: null }, what)
  }
  const fresh = await claimIdentify(stub({ ...grant, mode: 'resume', session }).client, 'node-a', 3, true)
  t.same(fresh, { outcome: { kind: 'failed', detail: 'the controller answered a fresh claim with a resume' }, resume: null })
})
