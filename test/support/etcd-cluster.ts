/**
 * Test harness: a real etcd cluster (1 or 3 members) on loopback with client and peer mutual TLS, its
 * certificates made at run time by the OpenSSL CLI in a temp folder. Members can be killed, frozen,
 * stopped and restarted. Every member dies with the test: at teardown, at process exit, and (through
 * setpriv's parent-death signal) even when the test process itself is killed. The tap-free core (binary,
 * certificates, guarded processes) is bench/support/etcd-process.ts, which the fleet simulator uses too.
 */
import type { Test } from 'tap'
import { startEtcdMembers, type EtcdMember, type Member } from '../../bench/support/etcd-process.js'
import type { EtcdClient, EtcdConnectionConfig } from '../../src/ha/etcd-api.js'
import { connectEtcd } from '../../src/ha/etcd-client.js'

export { exited, findEtcd, needsEtcd, processAlive, spawnGuarded, type EtcdMember } from '../../bench/support/etcd-process.js'

/** A running etcd cluster of the test. */
export interface EtcdCluster {
  readonly members: readonly EtcdMember[]
  /** Endpoints and the client certificate, as the HA config gives them. */
  readonly connection: EtcdConnectionConfig
  /** The scratch folder (certificates and data); removed at close. */
  readonly dir: string
  /** Opens a client over mTLS that is closed at the test's teardown. */
  client(t: Test, options?: { endpoints?: readonly string[] }): Promise<EtcdClient>
  /** `kill -9` of member `i`. */
  kill(i: number): Promise<void>
  /** Graceful stop (SIGTERM) of member `i`. */
  stop(i: number): Promise<void>
  /** Starts a killed or stopped member again on its data; resolves once it serves. */
  restart(i: number): Promise<void>
  /** SIGSTOP / SIGCONT of member `i`. */
  freeze(i: number): Promise<void>
  thaw(i: number): Promise<void>
  /** The member that most recently logged that it became the raft leader. */
  raftLeader(): number
  close(): Promise<void>
}

/**
 * Starts an etcd cluster of `size` members and waits until every member serves clients. It is torn
 * down (processes killed, folder removed) at the test's end. A port taken between the probe and
 * etcd's bind is retried with new ports. `maxTxnOps`: the members' --max-txn-ops (else etcd's 128).
 */
export async function startEtcdCluster(t: Test, size: 1 | 3 = 1, options: { readonly maxTxnOps?: number } = {}): Promise<EtcdCluster> {
  const running = await startEtcdMembers(size, options)
  t.teardown(running.close)
  return clusterHandle([...running.members], running.dir, running.connection, running.close)
}

function clusterHandle(members: Member[], dir: string, connection: EtcdConnectionConfig, close: () => Promise<void>): EtcdCluster {
  const at = (i: number): Member => {
    const m = members[i]
    if (!m) throw new Error(`no etcd member ${i}`)
    return m
  }
  return {
    members,
    connection,
    dir,
    async client(t, options = {}) {
      const client = await connectEtcd({ ...connection, endpoints: options.endpoints ?? connection.endpoints })
      t.teardown(() => client.close())
      return client
    },
    kill: (i) => at(i).signal('SIGKILL'),
    stop: (i) => at(i).signal('SIGTERM'),
    restart: (i) => at(i).start(),
    freeze: (i) => at(i).signal('SIGSTOP'),
    thaw: (i) => at(i).signal('SIGCONT'),
    raftLeader() {
      let best = { index: -1, term: -1 }
      members.forEach((m, index) => {
        for (const match of m.log().matchAll(/became leader at term (\d+)/g)) {
          if (Number(match[1]) > best.term) best = { index, term: Number(match[1]) }
        }
      })
      if (best.index < 0) throw new Error('no member logged that it became the raft leader')
      return best.index
    },
    close,
  }
}
