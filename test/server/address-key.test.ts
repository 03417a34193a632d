import t from 'tap'
import { addressKey } from '../../src/net/address-key.js'

t.test('IPv4 as is, IPv4-mapped unwrapped, IPv6 per /64', async (t) => {
  const cases: Array<[string | undefined, string]> = [
    ['10.1.2.3', '10.1.2.3'],
    ['::ffff:10.1.2.3', '10.1.2.3'],
    ['2001:db8:aa:bb:1:2:3:4', '2001:db8:aa:bb::/64'],
    ['2001:db8:aa:bb::1', '2001:db8:aa:bb::/64'],
    ['2001:0db8:00aa:00bb:ffff::', '2001:db8:aa:bb::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    [undefined, 'unknown'],
  ]
  for (const [input, key] of cases) t.equal(addressKey(input), key, String(input))
  t.equal(addressKey('2001:db8:aa:bb:1::'), addressKey('2001:db8:aa:bb:ffff:1:2:3'), 'one /64, one key')
  t.not(addressKey('2001:db8:aa:bb::1'), addressKey('2001:db8:aa:bc::1'), 'another /64, another key')
})
