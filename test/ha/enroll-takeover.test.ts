// Enrollment with HA (SPEC "Device enrollment and renewal"): the queue lives in etcd. A follower's enrollment
// listener refuses with 503 not_leader; after a take-over the new leader serves the requests the old one
// took, pending (with the proof the signer needs, sealed under the plan key both share) and issued alike.
import t from 'tap'
import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildCsr, csrDer } from '../../src/der/csr.js'
import { enrollProof, parseToken } from '../../src/core/enroll-token.js'
import { createToken } from '../../pki/token-store.js'
import { signPass } from '../../pki/enroll-issue.js'
import type { PulledRequest } from '../../pki/enroll-judge.js'
import { bundle, makePki, request } from '../e2e/harness.js'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'
import { haSection, leadingReplicas, startReplicaController } from './ha-fleet.js'
import { until } from './replica.js'

const root = mkdtempSync(join(tmpdir(), 'pxe-ha-enroll-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))

t.test('a take-over loses no request and no issued certificate', needsEtcd(), async (t) => {
  const [cluster, pki] = await Promise.all([startEtcdCluster(t, 1), makePki(root)])
  const ha = haSection(cluster, '/pxe-ha-enroll/', 2)
  const enroll = { enroll: { host: '127.0.0.1', port: 0 } }
  const replicas = [await startReplicaController(t, pki, root, 'ctl-a', ha, enroll), await startReplicaController(t, pki, root, 'ctl-b', ha, enroll)]
  const [op, signer] = await Promise.all([bundle(pki, 'alice', 'operator'), bundle(pki, 'ca-signer', 'signer')])
  await until(async () => (await leadingReplicas(replicas, pki.ca, op)).length === 1, 30_000, 'a leader')
  const [leader] = await leadingReplicas(replicas, pki.ca, op)
  const follower = replicas.find((r) => r !== leader)!
  const { token } = await createToken(pki.dir, { names: 'rack-*', uses: 5 })
  const { id, secret } = parseToken(token)
  const enrollment = (name: string) => {
    const csr = buildCsr(name, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey)
    return { token_id: id, csr, proof: enrollProof(secret, csrDer(csr)) }
  }
  const refused = await request(follower.enrollPort!, pki.ca, null, '/v1/enroll', { body: enrollment('rack-0') })
  t.equal(refused.status, 503, 'a follower does not take requests')
  t.equal(refused.json.error, 'not_leader')
  t.match(refused.json.message, leader!.id)

  const issuedBody = enrollment('rack-1')
  const issued = (await request(leader!.enrollPort!, pki.ca, null, '/v1/enroll', { body: issuedBody })).json.request_id as string
  const pull = async (port: number) => (await request(port, pki.ca, signer, '/v1/enroll/requests')).json.requests as PulledRequest[]
  const post = async (port: number, requests: PulledRequest[]) => {
    for (const o of (await signPass(pki.dir, requests)).outcomes) {
      if ('issued' in o) t.equal((await request(port, pki.ca, signer, `/v1/enroll/requests/${o.request_id}`, { body: { certificate: o.issued.certificate } })).status, 200)
    }
  }
  await post(leader!.port, await pull(leader!.port))
  const certificate = (await request(leader!.enrollPort!, pki.ca, null, `/v1/enroll/${issued}`)).json.certificate as string
  t.match(certificate, /BEGIN CERTIFICATE/)
  const pendingBody = enrollment('rack-2')
  const pending = (await request(leader!.enrollPort!, pki.ca, null, '/v1/enroll', { body: pendingBody })).json.request_id as string

  await leader!.stop() // steps down: the follower takes over
  await until(async () => (await leadingReplicas([follower], pki.ca, op)).length === 1, 30_000, 'the take-over')
  const after = await request(follower.enrollPort!, pki.ca, null, `/v1/enroll/${issued}`)
  t.equal(after.json.status, 'issued', 'the issued certificate is still there')
  t.equal(after.json.certificate, certificate)
  t.same((await request(follower.enrollPort!, pki.ca, null, `/v1/enroll/${pending}`)).json, { status: 'pending' })
  const pulled = await pull(follower.port)
  t.same(pulled.map((r) => r.request_id), [pending], 'the new leader lists the pending request')
  t.equal(pulled[0]!.proof, pendingBody.proof, 'with the proof the node sent')
  await post(follower.port, pulled)
  t.equal((await request(follower.enrollPort!, pki.ca, null, `/v1/enroll/${pending}`)).json.status, 'issued')
  const again = await request(follower.enrollPort!, pki.ca, null, '/v1/enroll', { body: issuedBody })
  t.equal(again.json.request_id, issued, 'the same CSR still finds its request after the take-over')
})
