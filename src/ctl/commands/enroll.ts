/** `pxe-ctl enroll list`: the enrollment queue as the controller sees it (SPEC "Device enrollment and renewal"). */
import type { CommandSpec } from '../command.js'
import { Refused } from '../api.js'
import { CtlError } from '../errors.js'
import { emit } from '../output.js'
import { age, renderTable } from '../table.js'

export const enrollList: CommandSpec = {
  words: 'enroll list',
  usage: '',
  summary: 'the enrollments and renewals waiting for the signer',
  details: `Reads GET /v1/enroll/queue: one row per pending request, oldest first, with its kind (enroll or renew),
the node name it asks for, the token id (never the token), the source address and its age. No CSR and no
proof are shown. The signer on the CA host answers them ("pxe-pki signer"); requests its policy holds for an
operator are approved there ("pxe-pki enroll approve REQUEST_ID").

Example:
  $ pxe-ctl enroll list
  REQUEST                 KIND    NAME          TOKEN       SOURCE      AGE
  3r9Q0m2N5u1kVb8xYz4AcD  enroll  rack7-node-1  k4m2z7q3xa  10.0.7.21   12s
  1 waiting (3 held in all)`,
  args: [],
  flags: [],
  async run(ctx) {
    let answer
    try {
      answer = await (await ctx.api()).enrollQueue()
    } catch (err) {
      if (err instanceof Refused && err.status === 404) throw new CtlError(`${err.message}; this controller is older than enrollment`)
      throw err
    }
    const q = answer.value
    emit(ctx, answer.raw, () => {
      const rows = q.requests.map((r) => [r.request_id, r.kind, r.name, r.token_id ?? '-', r.source, age(r.age_ms)])
      const table = rows.length === 0 ? 'no request waits for the signer' : renderTable(['REQUEST', 'KIND', 'NAME', 'TOKEN', 'SOURCE', 'AGE'], rows, new Set([5]))
      return `${table}\n${q.pending} waiting (${q.held} held in all)`
    })
  },
}
