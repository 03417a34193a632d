// ha.etcd.server_name: with IP endpoints grpc-js would send the IP as SNI (RFC 6066 forbids it; Node warns
// DEP0123, as a plain line before the controller logged warnings as JSON). With a server name the client
// sends that name and checks the member's certificate against it: a name the certificate does not carry
// is refused, and no DEP0123 is emitted. Without one, the IP is checked as before (and Node warns).
import t from 'tap'
import { connectEtcd } from '../../src/ha/etcd-client.js'
import { haConfigSchema } from '../../src/ha/ha-config.js'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'

const dep0123 = (warnings: readonly Error[]) => warnings.filter((w) => (w as Error & { code?: string }).code === 'DEP0123')

t.test('the schema takes a DNS name only', async (t) => {
  const etcd = { endpoints: ['https://10.0.0.5:2379'], ca: 'ca.pem', cert: 'c.pem', key: 'k.pem' }
  t.equal(haConfigSchema.parse({ etcd: { ...etcd, server_name: 'etcd.pxe.internal' } }).etcd.server_name, 'etcd.pxe.internal')
  for (const bad of ['10.0.0.5', '::1', '', 'a..b', '-x.example', 'under_score.example', 'x'.repeat(64)]) {
    t.throws(() => haConfigSchema.parse({ etcd: { ...etcd, server_name: bad } }), /DNS name/, JSON.stringify(bad))
  }
})

t.test('a real etcd over mutual TLS: the server name is what SNI sends and what is checked', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const warnings: Error[] = []
  const onWarning = (w: Error) => warnings.push(w)
  process.on('warning', onWarning)
  t.teardown(() => void process.off('warning', onWarning))
  const tick = () => new Promise((r) => setTimeout(r, 50))
  const put = async (serverName: string | undefined) => {
    const client = await connectEtcd({ ...cluster.connection, serverName }, { requestTimeoutMs: 3000 })
    try {
      return await client.txn({ compare: [], success: [{ type: 'put', key: '/sni/k', value: String(serverName) }] }, 3000)
    } finally {
      client.close()
    }
  }

  t.ok((await put('localhost')).succeeded, 'a name the certificate carries (DNS:localhost): served')
  await tick()
  t.same(dep0123(warnings), [], 'no DEP0123 with a server name')
  await t.rejects(put('etcd.invalid'), /altnames|ALTNAME/, 'a name the certificate does not carry: refused by the name check')

  // last: Node warns DEP0123 once per process
  t.ok((await put(undefined)).succeeded, 'no server name: the IP endpoint is checked against IP:127.0.0.1, as before')
  await tick()
  t.equal(dep0123(warnings).length, 1, 'and Node warns DEP0123 (what the server name avoids)')
})
