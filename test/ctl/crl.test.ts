// pxe-ctl crl push against a real controller that reads its own copy of the CRL (as one that reads an
// exported crl.pem does): revocation in one step from the CA host (`pxe-pki revoke` then `crl push`)
// refuses the revoked node at once; a CRL of another CA and an older CRL are refused with the reason.
import t from 'tap'
import { copyFileSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { revoke, writeCrl } from '../../pki/toolkit.js'
import { checkinBody, makePki, request } from '../e2e/harness.js'
import { startFleet } from './support.js'

let controllerCrl = ''
const fleet = await startFleet(t, (pki) => {
  controllerCrl = join(pki.dir, '..', 'controller-crl.pem')
  copyFileSync(join(pki.dir, 'crl.pem'), controllerCrl)
  return { tls: { ca: join(pki.dir, 'ca.pem'), cert: join(pki.dir, 'server.pem'), key: join(pki.dir, 'server-key.pem'), crl: controllerCrl } }
})
const { pki, root } = fleet
await fleet.checkIn('doomed', { capacity: 8 })
const older = join(root, 'older-crl.pem')
copyFileSync(join(pki.dir, 'crl.pem'), older)

const checkInWorks = async () => {
  try {
    return (await request(fleet.controller.port, pki.ca, await fleet.node('doomed'), '/v1/checkin', { body: checkinBody('doomed', { capacity: 8 }) })).status === 200
  } catch {
    return false // the handshake refused the certificate
  }
}

t.test('revoke, then crl push: installed, and the revoked node is refused at once', async (t) => {
  await revoke(pki.dir, { name: 'doomed' })
  t.equal(readFileSync(controllerCrl, 'utf8') === readFileSync(join(pki.dir, 'crl.pem'), 'utf8'), false, 'the controller\'s copy is still the old CRL')
  t.ok(await checkInWorks(), 'before the push the node still checks in')
  const res = await fleet.ctl('crl', 'push', join(pki.dir, 'crl.pem'))
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, `CRL installed by ${fleet.url}`)
  t.match(res.stdout, /^revoked\s+1$/m)
  t.match(res.stdout, /^changed\s+true$/m)
  t.notOk(await checkInWorks(), 'after the push the node is refused')
  const again = await fleet.ctl('crl', 'push', join(pki.dir, 'crl.pem'), '-o', 'json')
  t.equal(again.code, 0, again.stderr)
  t.match(JSON.parse(again.stdout), { revoked: 1, changed: false }, 'the same CRL again changes nothing')
})

t.test('refused CRLs: an older number, another CA; exit 1 with the controller\'s reason', async (t) => {
  const res = await fleet.ctl('crl', 'push', older)
  t.equal(res.code, 1)
  t.match(res.stderr, /^pxe-ctl: error: invalid_request: CRL refused \(.+\).*the CRL in force is unchanged/)
  const other = await makePki(join(root, 'other'))
  await writeCrl(other.dir)
  const foreign = await fleet.ctl('crl', 'push', join(other.dir, 'crl.pem'))
  t.equal(foreign.code, 1)
  t.match(foreign.stderr, /^pxe-ctl: error: invalid_request: CRL refused/)
  t.notOk(await checkInWorks(), 'the CRL in force is still the pushed one')
})
