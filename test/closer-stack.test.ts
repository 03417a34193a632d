// The composition root's closers: newest first, every one even after a failure, the first failure
// reported with its part's name, and only once however often the stop is asked for.
import t from 'tap'
import { CloserStack } from '../src/closer-stack.js'

t.test('newest first, all of them, the first failure reported, once', async (t) => {
  const ran: string[] = []
  const stack = new CloserStack()
  stack.push('ops', () => void ran.push('ops'))
  stack.push('audit', async () => {
    ran.push('audit')
    throw new Error('disk full')
  })
  stack.push('state', () => {
    ran.push('state')
    throw new Error('etcd gone')
  })
  stack.push('listener', async () => void ran.push('listener'))
  await t.rejects(Promise.all([stack.closeAll(), stack.closeAll()]), /stop: state failed: etcd gone/)
  t.same(ran, ['listener', 'state', 'audit', 'ops'], 'each closer ran once, in reverse build order')
  await t.rejects(stack.closeAll(), /state failed/, 'a later call gives the same outcome')
  t.same(ran.length, 4)
  t.throws(() => stack.push('late', () => undefined), /already closing/)
})
