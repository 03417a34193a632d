// CrlPush's 503 when the store cannot keep the CRL: the message names what failed (a file error's code,
// an etcd error's kind), and the CRL is not offered for install. The file-store path runs end to end in
// test/e2e/crl-push.test.ts; the etcd errors are hard to provoke there on purpose, so a store throws them here.
import t from 'tap'
import { CrlPush } from '../../src/service/crl-push.js'
import { EtcdClientError } from '../../src/ha/etcd-api.js'
import type { ParsedCrl } from '../../src/identity/crl.js'
import type { CrlEnforcement } from '../../src/identity/crl-enforcement.js'

const crl = { pem: 'PEM', crlNumber: 2n, thisUpdate: new Date(0), nextUpdate: null, revokedSerials: new Set<string>() } as unknown as ParsedCrl

function pushWith(failure: Error) {
  const offered: string[] = []
  const crls = {
    judge: () => ({ kind: 'load', crl }),
    offer: (pem: string) => {
      offered.push(pem)
      return { kind: 'loaded', crl }
    },
    inForce: crl,
  } as unknown as Pick<CrlEnforcement, 'judge' | 'offer' | 'inForce'>
  const store = {
    prepare: () => Promise.resolve(null as never),
    save: () => Promise.reject(failure),
  }
  return { push: new CrlPush({ crls, store }), offered }
}

t.test('an etcd error names its kind; a file error its code; anything else "error"; nothing is installed', async (t) => {
  const cases: [Error, string][] = [
    [new EtcdClientError('timeout', 'deadline exceeded'), 'timeout'],
    [new EtcdClientError('unavailable', 'no member reachable'), 'unavailable'],
    [Object.assign(new Error('no space left on device'), { code: 'ENOSPC' }), 'ENOSPC'],
    [new Error('something else'), 'error'],
  ]
  for (const [failure, named] of cases) {
    const { push, offered } = pushWith(failure)
    await t.rejects(
      push.push('PEM', 'ops-alice'),
      { code: 'unavailable', statusCode: 503, message: `the CRL could not be stored (${named}); retry: the answer says whether it is in force` },
      named,
    )
    t.same(offered, [], `${named}: not offered for install`)
  }
})
