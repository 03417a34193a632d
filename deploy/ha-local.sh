#!/usr/bin/env bash
# Try high availability locally, without compose: a 3-member etcd cluster on 127.0.0.1 with client and
# peer mutual TLS (its certificates made with openssl), a development PKI made by our toolkit (pxe-pki),
# and two controllers sharing that etcd: one leads, the other answers 503 not_leader until it takes over.
# Everything goes into DIR (certificates, PKI, data, configs, audit logs, logs); a second run reuses
# them. Ctrl-C (or SIGTERM) stops every process it started.
#
#   npm run build && deploy/ha-local.sh DIR
#
# Kill the leading controller (kill $(cat DIR/logs/controller-1.pid)) and the other takes over. To start
# a killed controller again, on its port and config (it joins as a follower):
#
#   kill -USR1 $(cat DIR/logs/ha-local.pid)      # restarts every controller of this run that has exited
#
# (or by hand, then stop it by hand too: node dist/src/main.js --config DIR/controller-1.json >>DIR/logs/controller-1.log 2>&1 &)
#
# Ports: etcd clients on BASE+1..BASE+3, peers on BASE+11..BASE+13, controllers on BASE+21 and BASE+22
# (their ops endpoints, plain HTTP: BASE+31 and BASE+32),
# BASE=${PXE_ETCD_BASE_PORT:-23790} (not etcd's default 2379, so a system etcd does not get in the way).
# Needs etcd (Debian: etcd-server), openssl and node on the PATH, and the built controller (dist/).
# PXE_LOCAL_ETCD_ONLY=1 starts the etcd cluster only.
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
case "${1:-}" in -h | --help) usage; exit 0 ;; esac
[ $# -eq 1 ] || { usage >&2; exit 2; }
DIR=$1
BASE=${PXE_ETCD_BASE_PORT:-23790}
ETCD_ONLY=${PXE_LOCAL_ETCD_ONLY:-}
REPO=$(cd "$(dirname "$0")/.." && pwd)
for tool in etcd openssl node; do
  command -v "$tool" >/dev/null || { echo "ha-local: $tool not found on the PATH" >&2; exit 1; }
done
if [ -z "$ETCD_ONLY" ] && [ ! -f "$REPO/dist/src/main.js" ]; then
  echo "ha-local: $REPO/dist is missing: run npm run build first" >&2
  exit 1
fi
umask 077
mkdir -p "$DIR/certs" "$DIR/data" "$DIR/logs"
DIR=$(cd "$DIR" && pwd)
CERTS=$DIR/certs

# One leaf certificate signed by the local etcd CA: leaf NAME CN EXTENSIONS
leaf() {
  printf '%b' "$3" >"$CERTS/$1.ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$CERTS/$1-key.pem" -out "$CERTS/$1.csr" -subj "/CN=$2" 2>/dev/null
  openssl x509 -req -in "$CERTS/$1.csr" -CA "$CERTS/ca.pem" -CAkey "$CERTS/ca-key.pem" \
    -set_serial "0x$(openssl rand -hex 16)" -days 30 -sha256 -extfile "$CERTS/$1.ext" -out "$CERTS/$1.pem" 2>/dev/null
  rm -f "$CERTS/$1.csr" "$CERTS/$1.ext"
}

if [ ! -f "$CERTS/client.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -keyout "$CERTS/ca-key.pem" -out "$CERTS/ca.pem" -subj "/CN=pxe-local-etcd-ca" \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  # etcd dials its own members with the server and peer certificates too: both need clientAuth
  SERVER_EXT='basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n'
  leaf server etcd-server "$SERVER_EXT"
  leaf peer etcd-peer "$SERVER_EXT"
  leaf client pxe-controller 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n'
  echo "ha-local: certificates made in $CERTS"
fi

CLUSTER=""
for i in 1 2 3; do CLUSTER="$CLUSTER${CLUSTER:+,}m$i=https://127.0.0.1:$((BASE + 10 + i))"; done

# members die with this script even when it is killed outright (SIGKILL skips the trap below)
GUARD=()
if command -v setpriv >/dev/null; then GUARD=(setpriv --pdeathsig TERM --); fi

PIDS=()
stop_all() {
  trap - EXIT INT TERM
  if [ "${#PIDS[@]}" -gt 0 ]; then
    # the controllers first (they write their state and step down while etcd still runs), then etcd
    if [ "${#PIDS[@]}" -gt 3 ]; then
      kill "${PIDS[@]:3}" 2>/dev/null || true
      wait "${PIDS[@]:3}" 2>/dev/null || true
    fi
    kill "${PIDS[@]:0:3}" 2>/dev/null || true
    wait "${PIDS[@]}" 2>/dev/null || true
  fi
  echo "ha-local: controllers and etcd stopped" >&2
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for i in 1 2 3; do
  client="https://127.0.0.1:$((BASE + i))"
  peer="https://127.0.0.1:$((BASE + 10 + i))"
  "${GUARD[@]}" etcd --name "m$i" --data-dir "$DIR/data/m$i" --logger=zap --log-outputs=stderr \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "$CLUSTER" --initial-cluster-state new --initial-cluster-token pxe-local \
    --cert-file "$CERTS/server.pem" --key-file "$CERTS/server-key.pem" --trusted-ca-file "$CERTS/ca.pem" --client-cert-auth \
    --peer-cert-file "$CERTS/peer.pem" --peer-key-file "$CERTS/peer-key.pem" --peer-trusted-ca-file "$CERTS/ca.pem" --peer-client-cert-auth \
    --auto-compaction-mode revision --auto-compaction-retention 10000 --max-txn-ops 4096 \
    2>"$DIR/logs/m$i.log" &
  PIDS+=("$!")
  echo "$!" >"$DIR/logs/m$i.pid"
done

for i in 1 2 3; do
  for _ in $(seq 1 200); do
    grep -q '"msg":"serving client traffic securely"' "$DIR/logs/m$i.log" 2>/dev/null && break
    kill -0 "${PIDS[$((i - 1))]}" 2>/dev/null || { echo "ha-local: etcd m$i exited; see $DIR/logs/m$i.log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q '"msg":"serving client traffic securely"' "$DIR/logs/m$i.log" || { echo "ha-local: etcd m$i not ready in 20 s; see $DIR/logs/m$i.log" >&2; exit 1; }
done

ENDPOINTS="\"https://127.0.0.1:$((BASE + 1))\", \"https://127.0.0.1:$((BASE + 2))\", \"https://127.0.0.1:$((BASE + 3))\""
# server_name: the certificates' DNS name, sent as SNI instead of the endpoints' IP (which Node refuses with DEP0123);
# max_txn_ops: the members' --max-txn-ops above (a large change goes out in one transaction, not one per phase)
HA="{\"etcd\": {\"endpoints\": [$ENDPOINTS], \"ca\": \"$CERTS/ca.pem\", \"cert\": \"$CERTS/client.pem\", \"key\": \"$CERTS/client-key.pem\", \"server_name\": \"localhost\", \"max_txn_ops\": 4096}, \"prefix\": \"/pxe/\", \"lease_ttl_seconds\": 10}"
echo "ha-local: etcd cluster of 3 members ready (logs in $DIR/logs)"
echo "$HA" >"$DIR/ha.json"
echo "ha-local: \"ha\" section for each controller's config (also in $DIR/ha.json):"
echo "$HA"
if [ -n "$ETCD_ONLY" ]; then
  echo "ha-local: Ctrl-C stops the cluster"
  wait
  exit 0
fi

# --- controllers: a development PKI by our toolkit, two configs, two processes ----------------------
PKI=$DIR/pki
pki() { node "$REPO/dist/pki/cli.js" "$@" --dir "$PKI" >/dev/null; }
if [ ! -f "$PKI/server.pem" ]; then
  pki init
  pki server-cert --dns localhost --ip 127.0.0.1
  pki issue local-node-1 --role node
  pki issue local-operator --role operator
  echo "ha-local: development PKI made in $PKI (bundles in $PKI/bundles)"
fi
PORTS=()
# controller i's process is PIDS[i + 2] (after the three etcd members); a restart appends to its log
start_controller() {
  "${GUARD[@]}" node "$REPO/dist/src/main.js" --config "$DIR/controller-$1.json" >>"$DIR/logs/controller-$1.log" 2>&1 &
  PIDS[$(($1 + 2))]=$!
  echo "$!" >"$DIR/logs/controller-$1.pid"
}
restart_exited() {
  for i in 1 2; do
    if ! kill -0 "${PIDS[$((i + 2))]}" 2>/dev/null; then
      start_controller "$i"
      echo "ha-local: controller $i started again (pid ${PIDS[$((i + 2))]}, log $DIR/logs/controller-$i.log); it joins as a follower"
    fi
  done
}
for i in 1 2; do
  port=$((BASE + 20 + i))
  PORTS+=("$port")
  mkdir -p "$DIR/controller-$i"
  cat >"$DIR/controller-$i.json" <<JSON
{ "listen": { "host": "127.0.0.1", "port": $port },
  "tls": { "ca": "pki/ca.pem", "cert": "pki/server.pem", "key": "pki/server-key.pem", "crl": "pki/crl.pem" },
  "plan_keys": "pki/plan-keys.json", "audit_log": "controller-$i/audit.log",
  "controller_id": "pxe-local-$i", "total_shards": 64, "max_concurrency": 16,
  "ops": { "host": "127.0.0.1", "port": $((BASE + 30 + i)) },
  "ha": $HA }
JSON
  : >"$DIR/logs/controller-$i.log"
  start_controller "$i"
done
for i in 1 2; do
  for _ in $(seq 1 300); do
    grep -q '"msg":"controller listening (mTLS)"' "$DIR/logs/controller-$i.log" 2>/dev/null && break
    kill -0 "${PIDS[$((i + 2))]}" 2>/dev/null || { echo "ha-local: controller $i exited; see $DIR/logs/controller-$i.log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q '"msg":"controller listening (mTLS)"' "$DIR/logs/controller-$i.log" || { echo "ha-local: controller $i not listening in 30 s; see $DIR/logs/controller-$i.log" >&2; exit 1; }
done

NODE=$PKI/bundles/local-node-1
OP=$PKI/bundles/local-operator
echo "ha-local: controllers pxe-local-1 and pxe-local-2 on https://127.0.0.1:${PORTS[0]} and :${PORTS[1]} (logs in $DIR/logs)"
echo "ha-local: a node check-in (one of the two answers 503 not_leader naming the leader):"
for port in "${PORTS[@]}"; do
  echo "  curl --cacert $NODE/ca.pem --cert $NODE/cert.pem --key $NODE/key.pem -H 'content-type: application/json' \\"
  echo "    -d '{\"node_id\":\"local-node-1\",\"capacity\":16,\"ready_shards\":0,\"starting_shards\":0,\"backoff_shards\":0,\"fatal_shards\":0}' https://127.0.0.1:$port/v1/checkin"
done
echo "ha-local: the node agent takes both: pxe-node --bundle $NODE --controller https://127.0.0.1:${PORTS[0]},https://127.0.0.1:${PORTS[1]}"
echo "ha-local: the plan, as operator: curl --cacert $OP/ca.pem --cert $OP/cert.pem --key $OP/key.pem https://127.0.0.1:${PORTS[0]}/v1/plan"
echo "ha-local: readiness (200 on the leader, 503 not_leader on the other): curl http://127.0.0.1:$((BASE + 31))/readyz and :$((BASE + 32))/readyz"
echo "ha-local: kill the leader (kill \$(cat $DIR/logs/controller-1.pid)) and the other takes over within 2 x 10 s"
echo "ha-local: start a killed controller again (it joins as a follower): kill -USR1 \$(cat $DIR/logs/ha-local.pid)"
echo "ha-local: Ctrl-C stops the controllers and the cluster"
trap restart_exited USR1
echo "$$" >"$DIR/logs/ha-local.pid"
# wait returns early when USR1 arrives: wait again, until every process ended
while [ -n "$(jobs -pr)" ]; do wait || true; done
