// Which resume URLs a deposit may carry (SPEC "Session handoff"), rule by rule.
import t from 'tap'
import { allowedHostProblem, canonicalResumeUrl, DEFAULT_ALLOWED_RESUME_HOSTS, resumeUrlProblem } from '../../src/core/resume-url.js'

t.test('the default list admits Discord gateway hosts over wss:// only', async (t) => {
  const hosts = DEFAULT_ALLOWED_RESUME_HOSTS
  for (const ok of ['wss://gateway.discord.gg', 'wss://gateway-us-east1-b.discord.gg', 'wss://gateway.discord.gg/', 'wss://gateway.discord.gg:443', 'wss://a.b.discord.gg', 'wss://GATEWAY.discord.gg']) {
    t.equal(resumeUrlProblem(ok, hosts), null, ok)
  }
  const refused: [string, RegExp][] = [
    ['wss://discord.gg', /does not admit/],
    ['wss://evildiscord.gg', /does not admit/],
    ['wss://discord.gg.evil.com', /does not admit/],
    ['wss://gateway.discord.gg.', /plain host/],
    ['wss://127.0.0.1', /does not admit/],
    ['ws://gateway.discord.gg', /must be wss/],
    ['ws://127.0.0.1:80', /does not admit/],
    ['http://gateway.discord.gg', /must be a wss/],
    ['wss://u:p@gateway.discord.gg', /user name or password/],
    ['wss://gateway.discord.gg/path', /no path/],
    ['wss://gateway.discord.gg?v=10', /no path/],
    ['wss://gateway.discord.gg?', /no path/],
    ['wss://gateway.discord.gg#x', /no path/],
    ['wss://gateway.discord.gg ', /printable ASCII/],
    ['wss://gateway.discord.gg\n', /printable ASCII/],
    ['wss:\\\\gateway.discord.gg', /backslash/],
    ['', /printable ASCII/],
    ['wss://', /not a URL/],
  ]
  for (const [url, problem] of refused) t.match(resumeUrlProblem(url, hosts), problem, JSON.stringify(url))
})

t.test('ws:// only to a loopback host the list names exactly', async (t) => {
  const hosts = ['127.0.0.1', '[::1]', 'localhost', 'gw.example.net']
  t.equal(resumeUrlProblem('ws://127.0.0.1:4567', hosts), null)
  t.equal(resumeUrlProblem('ws://[::1]:4567', hosts), null)
  t.equal(resumeUrlProblem('ws://localhost:1', hosts), null)
  t.equal(resumeUrlProblem('wss://127.0.0.1:4567', hosts), null, 'wss:// to a listed loopback host')
  t.match(resumeUrlProblem('ws://gw.example.net', hosts), /must be wss/, 'a listed host that is not loopback')
  t.match(resumeUrlProblem('ws://127.0.0.2', hosts), /does not admit/)
  t.equal(resumeUrlProblem('ws://127.1', hosts), null, 'a short IPv4 form is normalized first: the same listed host')
})

t.test('allowed_hosts entries: names, IPv4, [::1], and wildcards of two labels or more', async (t) => {
  for (const ok of ['gateway.discord.gg', '*.discord.gg', '127.0.0.1', '[::1]', 'localhost', 'a-b.c']) t.equal(allowedHostProblem(ok), null, ok)
  for (const bad of ['*', '*.gg', '**.discord.gg', '*.*.discord.gg', 'Discord.gg', 'gateway.discord.gg:443', 'wss://gateway.discord.gg', '', '-a.gg', 'a..gg', '::1', 'discord.gg.']) {
    t.type(allowedHostProblem(bad), 'string', JSON.stringify(bad))
  }
})

t.test('the host must be a plain name or an address, a port only on loopback, and the URL is handed out rebuilt', async (t) => {
  const hosts = DEFAULT_ALLOWED_RESUME_HOSTS
  // shell syntax and odd labels WHATWG URL lets through in a host: a start command may pass the URL to a shell
  for (const bad of ['wss://$(touch${IFS}pwned).discord.gg', 'wss://`id`.discord.gg', "wss://a'b\".discord.gg", 'wss://a..discord.gg', 'wss://-x.discord.gg', 'wss://a;b.discord.gg', 'wss://a!b.discord.gg', 'wss://a*b.discord.gg']) {
    t.match(resumeUrlProblem(bad, hosts), /plain host|printable|not a URL/, JSON.stringify(bad))
  }
  t.match(resumeUrlProblem('wss://gateway.discord.gg:0', hosts), /must not name a port/)
  t.match(resumeUrlProblem('wss://gateway.discord.gg:8443', hosts), /must not name a port/)
  t.equal(resumeUrlProblem('wss://gateway.discord.gg:443', hosts), null, "wss's own port is no port")
  t.equal(canonicalResumeUrl('wss://gateway.discord.gg:443/'), 'wss://gateway.discord.gg')
  t.equal(canonicalResumeUrl('wss://GATEWAY-us-east1-b.Discord.gg'), 'wss://gateway-us-east1-b.discord.gg')
  t.equal(canonicalResumeUrl('wss://gateway%2Ediscord%2Egg'), 'wss://gateway.discord.gg', 'percent-encoding decoded by the parser: handed out plain')
  t.equal(canonicalResumeUrl('ws://0x7f.0.0.1:80'), 'ws://127.0.0.1', 'an IPv4 spelling handed out canonical')
  t.equal(canonicalResumeUrl('ws://127.0.0.1:4567'), 'ws://127.0.0.1:4567')
  t.match(allowedHostProblem('*.0.0.1'), /host name/, 'a wildcard over addresses')
  t.match(allowedHostProblem('a.123'), /host name/, 'a name whose last label is a number (an IPv4 form)')
})
