// How calls spread over etcd members: a member that just failed is skipped while another is usable, the
// last usable member is never refused, and only member faults (not refused requests) count.
import t from 'tap'
import { memberPolicies, retryOnOtherMember } from '../../src/ha/member-policy.js'

class Fault extends Error {
  override readonly name = 'Fault'
}
const fault = () => Promise.reject(new Fault('unreachable'))
const ok = () => Promise.resolve('ok')

t.test('a failed member cools down while another is usable', async (t) => {
  let clock = 0
  const policies = memberPolicies((err) => err instanceof Fault, 2000, () => clock)
  const [a, b] = [policies('a'), policies('b')]
  await t.rejects(a.execute(fault), { name: 'Fault' }, 'a fails')
  await t.rejects(a.execute(ok), { name: 'MemberCoolingDown' }, 'a is skipped right after, b being usable')
  t.equal(await b.execute(ok), 'ok')
  clock = 2001
  t.equal(await a.execute(ok), 'ok', 'after the cool-down a is tried again')
  await t.rejects(a.execute(fault), { name: 'Fault' })
  await t.rejects(b.execute(fault), { name: 'Fault' })
  t.equal(await a.execute(ok), 'ok', 'both cooling down: none is refused')
  await t.rejects(b.execute(ok), { name: 'MemberCoolingDown' }, 'a answered again, so b waits out its cool-down')
  await t.rejects(a.execute(() => Promise.reject(new Error('request too large'))), /too large/)
  t.equal(await a.execute(ok), 'ok', 'a refused request is not a member fault')
})

t.test('only retryable errors are retried, once per member', async (t) => {
  let calls = 0
  const policy = retryOnOtherMember(3, (err) => err instanceof Fault)
  await t.rejects(policy.execute(() => (calls++, fault())), { name: 'Fault' })
  t.equal(calls, 3, 'three members, three tries')
  calls = 0
  await t.rejects(policy.execute(() => (calls++, Promise.reject(new Error('deadline')))), /deadline/)
  t.equal(calls, 1, 'an error that may have been processed is not retried')
  calls = 0
  t.equal(await policy.execute(() => (++calls < 2 ? fault() : ok())), 'ok', 'the next member answers')
})

t.test("a fault seen outside a call (a keepalive that timed out) is counted against the member at the stream's peer", async (t) => {
  let clock = 0
  const policies = memberPolicies((err) => err instanceof Fault, 2000, () => clock)
  const [a, b, v6] = [policies('https://127.0.0.1:2379'), policies('https://127.0.0.2:2379'), policies('https://[::1]:2379')]
  t.equal(policies.failAddress('127.0.0.1:2379'), true, "getPeer()'s host:port names the member")
  await t.rejects(a.execute(ok), { name: 'MemberCoolingDown' }, 'the next call skips it')
  t.equal(await b.execute(ok), 'ok')
  t.equal(policies.failAddress('[::1]:2379'), true, 'an IPv6 peer too')
  await t.rejects(v6.execute(ok), { name: 'MemberCoolingDown' })
  t.equal(policies.failAddress('10.9.9.9:2379'), false, 'an address of no member changes nothing')
  t.equal(policies.failAddress('unknown'), false, "a call that never reached a member (getPeer() says 'unknown')")
  clock = 2001
  t.equal(await a.execute(ok), 'ok', 'after the cool-down it is tried again')
})

t.test('a fault seen outside a call is counted against the member the call was made on (a stream whose peer is unknown)', async (t) => {
  let clock = 0
  const policies = memberPolicies((err) => err instanceof Fault, 2000, () => clock)
  const [a, b] = [policies('https://127.0.0.1:2379'), policies('https://127.0.0.2:2379')]
  const stream = { kind: 'keepalive stream' }
  t.equal(await a.execute(async () => stream), stream, "a's policy opened the stream (opening is all it sees)")
  t.equal(policies.failCallOf(stream), true, 'its timeout names the member')
  await t.rejects(a.execute(ok), { name: 'MemberCoolingDown' }, 'the next call skips it')
  t.equal(await b.execute(ok), 'ok', 'and goes to another member')
  t.equal(policies.failCallOf({}), false, 'an object no policy returned changes nothing')
  clock = 2001
  t.equal(await a.execute(ok), 'ok', 'after the cool-down it is tried again')
})
