// A start that fails half-way (the mTLS port is taken, after the state, the audit log and the ops
// endpoint were opened) releases exactly what it had built: the ops port is free again, the audit log
// holds no start or stop, and the same state_dir starts cleanly right after.
import t from 'tap'
import { createServer } from 'node:net'
import type { AddressInfo } from 'node:net'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { makePki, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const probe = createServer()
    probe.once('error', () => resolve(true))
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(false)))
  })

t.test('the mTLS port in use: the start fails and leaves nothing open', async (t) => {
  const blocker = createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => blocker.close(() => resolve())))
  const taken = (blocker.address() as AddressInfo).port
  const free = createServer()
  await new Promise<void>((resolve) => free.listen(0, '127.0.0.1', resolve))
  const opsPort = (free.address() as AddressInfo).port
  await new Promise<void>((resolve) => free.close(() => resolve()))

  await t.rejects(startTestController(pki, root, { listen: { host: '127.0.0.1', port: taken }, ops: { host: '127.0.0.1', port: opsPort } }), /EADDRINUSE/)
  t.notOk(await listening(opsPort), 'the ops endpoint it had opened is closed again')
  const audit = existsSync(join(root, 'audit.log')) ? readFileSync(join(root, 'audit.log'), 'utf8') : ''
  t.notMatch(audit, /controller_start|controller_stop/, 'no start and no stop were audited')

  const ctl = await startTestController(pki, root, { ops: { host: '127.0.0.1', port: opsPort } })
  t.teardown(() => ctl.running.stop())
  t.ok(ctl.port > 0, 'the same state_dir and ops port serve right after')
})
