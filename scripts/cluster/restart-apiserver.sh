#!/bin/bash
# scripts/cluster/restart-apiserver.sh DIR [--compact]
#
# Stops the kube-apiserver that control-plane-up.sh started in DIR and starts it again
# with the same command line (DIR/apiserver.cmd), then waits until it is ready. With
# --compact, etcd's history is compacted to its current revision while the server is
# down. A restarted server's watch cache starts at etcd's current revision, so a client
# that resumes a watch from an older resourceVersion gets 410 Gone ("too old resource
# version") and has to list again: the way to produce a live 410 on demand.
set -euo pipefail

usage() { echo "usage: $0 DIR [--compact]" >&2; exit 2; }
[ $# -ge 1 ] || usage
DIR=$1; COMPACT=${2:-}
[ -z "$COMPACT" ] || [ "$COMPACT" = --compact ] || usage
[ -f "$DIR/apiserver.cmd" ] && [ -f "$DIR/apiserver.pid" ] ||
  { echo "restart-apiserver: no API server of control-plane-up.sh in $DIR" >&2; exit 1; }
mapfile -d '' -t CMD <"$DIR/apiserver.cmd"
# shellcheck disable=SC1091
. "$DIR/env.sh" # KUBE_APISERVER_URL, ETCD_ENDPOINT

# SIGTERM, and SIGKILL if its graceful shutdown (which waits for long requests such as
# watches) takes longer than 10 s: for its clients the two are the same restart.
pid=$(cat "$DIR/apiserver.pid")
kill "$pid" 2>/dev/null || true
for i in $(seq 1 100); do
  kill -0 "$pid" 2>/dev/null || break
  [ "$i" = 50 ] && kill -KILL "$pid" 2>/dev/null
  [ "$i" = 100 ] && { echo "restart-apiserver: kube-apiserver $pid still runs 10 s after SIGKILL" >&2; exit 1; }
  sleep 0.2
done

if [ -n "$COMPACT" ]; then
  etcd_url=$ETCD_ENDPOINT
  # etcd's JSON gateway: any range answer carries the current revision in its header.
  revision=$(curl -fsS -X POST "$etcd_url/v3/kv/range" -d '{"key":"AA=="}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
  curl -fsS -X POST "$etcd_url/v3/kv/compaction" -d "{\"revision\": \"$revision\", \"physical\": true}" >/dev/null
  echo "restart-apiserver: etcd compacted to revision $revision" >&2
fi

setsid "${CMD[@]}" </dev/null >>"$DIR/logs/kube-apiserver.log" 2>&1 &
echo $! >"$DIR/apiserver.pid"
for i in $(seq 1 300); do
  if curl -fsS --cacert "$DIR/pki/ca.crt" --cert "$DIR/pki/admin.crt" --key "$DIR/pki/admin.key" \
       "$KUBE_APISERVER_URL/readyz" 2>/dev/null | grep -q '^ok$'; then
    echo "restart-apiserver: kube-apiserver ready again (pid $(cat "$DIR/apiserver.pid"))" >&2
    exit 0
  fi
  kill -0 "$(cat "$DIR/apiserver.pid")" 2>/dev/null ||
    { echo "restart-apiserver: kube-apiserver died; see $DIR/logs/kube-apiserver.log" >&2; tail -30 "$DIR/logs/kube-apiserver.log" >&2; exit 1; }
  sleep 0.2
done
echo "restart-apiserver: kube-apiserver not ready 60 s after its restart" >&2
exit 1
