import type { Test } from 'tap'

/**
 * `t.testdir(content)`, removed only after the test's teardowns have run.
 *
 * tap chains its end-of-test hooks in the order they are first asked for: when `t.testdir()` comes
 * before the first `t.teardown()`, the folder is removed *before* the teardowns run, so a controller
 * that the teardown would stop is still writing its state into a folder being removed (ENOTEMPTY, and
 * the test fails in teardown on a loaded machine). Registering a teardown first puts removal last.
 */
export function testDir(t: Test, content?: Parameters<Test['testdir']>[0]): string {
  t.teardown(() => undefined)
  return t.testdir(content)
}
