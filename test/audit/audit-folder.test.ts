// The audit log's folder is created as the state directory is (mode 0700, parents included), so that
// `audit_log: /var/log/pxe/audit.log` works on a fresh host; an existing folder keeps its mode.
import t from 'tap'
import { chmodSync, mkdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { AuditLog } from '../../src/audit/audit-log.js'
import { testDir } from '../support/test-dir.js'

t.test('a missing folder is created 0700, with its parents; the log 0600', async (t) => {
  const root = testDir(t, {})
  const path = join(root, 'log', 'pxe', 'audit.log')
  const log = await AuditLog.open(path)
  log.record('controller_start', { controller_id: 'c1' })
  await log.close()
  t.equal(statSync(join(root, 'log', 'pxe')).mode & 0o777, 0o700, 'the folder')
  t.equal(statSync(join(root, 'log')).mode & 0o777, 0o700, 'its parent')
  t.equal(statSync(path).mode & 0o777, 0o600, 'the log')
  t.match(readFileSync(path, 'utf8'), /"event":"controller_start"/)
})

t.test('an existing folder keeps its mode', async (t) => {
  const root = testDir(t, {})
  mkdirSync(join(root, 'shared'))
  chmodSync(join(root, 'shared'), 0o750)
  const log = await AuditLog.open(join(root, 'shared', 'audit.log'))
  await log.close()
  t.equal(statSync(join(root, 'shared')).mode & 0o777, 0o750)
})
