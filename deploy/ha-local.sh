#!/usr/bin/env bash
# Try high availability locally, without compose: a 3-member etcd cluster on 127.0.0.1 with client and
# peer mutual TLS, its certificates made with openssl. Everything goes into DIR (certificates, data,
# logs); a second run reuses them. Ctrl-C (or SIGTERM) stops every member it started.
#
#   deploy/ha-local.sh DIR
#
# Ports: clients on BASE+1..BASE+3, peers on BASE+11..BASE+13, BASE=${PXE_ETCD_BASE_PORT:-23790}
# (not etcd's default 2379, so a system etcd does not get in the way). Needs etcd (Debian: etcd-server)
# and openssl on the PATH.
set -euo pipefail

DIR=${1:?usage: deploy/ha-local.sh DIR}
BASE=${PXE_ETCD_BASE_PORT:-23790}
for tool in etcd openssl; do
  command -v "$tool" >/dev/null || { echo "ha-local: $tool not found on the PATH" >&2; exit 1; }
done
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
    kill "${PIDS[@]}" 2>/dev/null || true
    wait "${PIDS[@]}" 2>/dev/null || true
  fi
  echo "ha-local: etcd stopped" >&2
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
    --auto-compaction-mode revision --auto-compaction-retention 10000 \
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
echo "ha-local: etcd cluster of 3 members ready (logs in $DIR/logs)"
echo "ha-local: \"ha\" section for each controller's config:"
echo "{\"etcd\": {\"endpoints\": [$ENDPOINTS], \"ca\": \"$CERTS/ca.pem\", \"cert\": \"$CERTS/client.pem\", \"key\": \"$CERTS/client-key.pem\"}, \"prefix\": \"/pxe/\", \"lease_ttl_seconds\": 10}"

# --- controllers -----------------------------------------------------------------------------------
# PLACEHOLDER (not implemented yet): start two controllers here, each with its own controller_id,
# listen port and state folder, and the "ha" section printed above in its config file, e.g.
#   pxe-controller --config "$DIR/controller-1.json" & PIDS+=("$!")
#   pxe-controller --config "$DIR/controller-2.json" & PIDS+=("$!")
# The controllers do not read the "ha" section yet; until they do, this script runs etcd only.
# ----------------------------------------------------------------------------------------------------

echo "ha-local: Ctrl-C stops the cluster"
wait
