#!/usr/bin/env bash
# scripts/cluster/record-node-fixture.sh OUT.jsonl — records a real API server's answers
# to one podhost node's list + watch of its own Node (cluster::own_node) while an
# administrator labels and taints the Node, for tests/cluster_replay.rs. Only the
# exchanges of that list + watch are kept. Needs KUBE_APISERVER (and etcd, kubectl) as
# scripts/cluster-test.sh; PODHOST defaults to target/debug/podhost.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT.jsonl}
NODE=podhost-n
RECORD_NAME=record-node
# shellcheck source=scripts/cluster/record-common.sh
source scripts/cluster/record-common.sh
record_setup
record_start_node
k label node "$NODE" tier=core >/dev/null
k taint node "$NODE" maintenance=yes:NoExecute >/dev/null
sleep 2
kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
grep -E '"method":"GET","path":"/api/v1/nodes"' "$WORK/api.jsonl" | grep "metadata.name%3D$NODE\|metadata.name=$NODE" >"$OUT"
echo "recorded $(wc -l <"$OUT") exchanges into $OUT"
