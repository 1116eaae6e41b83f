#!/bin/bash
# scripts/cluster/node-netns.sh up DIR NODE... | down DIR
#
# Gives each podhost node of a local cluster test its own network namespace, as if it
# were its own machine: a host-side bridge with the first address of a private /24,
# and per node a netns with a veth into that bridge (eth0, the next addresses, default
# route via the bridge). The API server binds the bridge's address (control-plane-up.sh
# API_ADDRESS=...), the nodes reach it there and it reaches each node's kubelet port at
# the node's address (its --node-ip).
#
# The subnet is 10.O.0.0/24 with O random in 100..239, the whole 10.O.0.0/16 checked
# against every address and route of the host (under a lock, as several developers run
# this at once); pod CIDRs for the nodes come from the same /16: per node
# 10.O.(10+i).0/24 (for --pod-cidr), and 10.O.128.0/17 as the cluster CIDR
# (kube-controller-manager --cluster-cidr, which hands /24s to the Nodes), and
# 10.O.64.0/20 as the Services' range (control-plane-up.sh SERVICE_CIDR), so that
# a run's Services are routable without meeting another run's. The host routes each
# node's pod CIDR to the node, as a cloud's route controller does: the API server
# reaches pods (its proxy, webhooks and aggregated APIs with --enable-aggregator-routing)
# at their own addresses.
# Names carry a random tag: netns phn-TAG-I, bridge phbTAG, host veth ends phvTAG-I.
#
# `up` writes DIR/netns.env (bash: HOST_ADDR, CLUSTER_CIDR, SERVICE_CIDR, and the associative arrays
# NODE_NETNS, NODE_ADDR, NODE_POD_CIDR by node name) and DIR/netns.state, from which
# `down` removes the namespaces and links (the nodes' own bridges, veths and nft tables
# live inside their namespaces and go with them). A process still in a namespace
# (a daemon or a container the test left) is killed first: `down` is for test nodes.
#
# Run the daemon with `nsenter --net=/run/netns/NAME`, not `ip netns exec`: the latter
# also enters a new mount namespace with a fresh /sys, which hides /sys/fs/cgroup
# (podhost would find no cgroups) and keeps its mounts away from the host.
set -euo pipefail

usage() { echo "usage: $0 up DIR NODE... | down DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
CMD=$1; DIR=$2; shift 2
[ "$(id -u)" -eq 0 ] || { echo "node-netns: run as root" >&2; exit 1; }

down() {
  local state=$DIR/netns.state kind name pid
  [ -f "$state" ] || return 0
  # namespaces first: their processes, then the namespace (its veth ends go with it)
  while read -r kind name; do
    [ "$kind" = netns ] || continue
    [ -e "/run/netns/$name" ] || continue
    for pid in $(ip netns pids "$name" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
    for _ in $(seq 1 50); do [ -z "$(ip netns pids "$name" 2>/dev/null)" ] && break; sleep 0.1; done
    for pid in $(ip netns pids "$name" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$name" 2>/dev/null || true
  done <"$state"
  while read -r kind name; do
    [ "$kind" = link ] || continue
    ip link del "$name" 2>/dev/null || true
  done <"$state"
  rm -f "$state" "$DIR/netns.env"
}

if [ "$CMD" = down ]; then
  [ $# -eq 0 ] || usage
  down
  exit 0
fi
[ "$CMD" = up ] && [ $# -ge 1 ] || usage
NODES=("$@")
[ ${#NODES[@]} -le 50 ] || { echo "node-netns: at most 50 nodes" >&2; exit 2; }
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
[ ! -e "$DIR/netns.state" ] || { echo "node-netns: $DIR has namespaces already; run down first" >&2; exit 1; }
: >"$DIR/netns.state"
trap 'rc=$?; [ $rc -eq 0 ] || down' EXIT

# Whether 10.O.0.0/16 meets any address or route of the host (default routes aside).
taken() {
  python3 - "$1" <<'PY'
import ipaddress, json, subprocess, sys
mine = ipaddress.ip_network(f"10.{sys.argv[1]}.0.0/16")
nets = []
for cmd in (["ip", "-j", "-4", "addr"], ["ip", "-j", "-4", "route", "show", "table", "all"]):
    for entry in json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout or "[]"):
        for a in entry.get("addr_info", []):
            nets.append(ipaddress.ip_network(f"{a['local']}/{a['prefixlen']}", strict=False))
        dst = entry.get("dst")
        if dst and dst != "default":
            nets.append(ipaddress.ip_network(dst if "/" in dst else dst + "/32", strict=False))
sys.exit(0 if any(n.overlaps(mine) for n in nets) else 1)
PY
}

exec 9>/run/lock/podhost-node-netns.lock
flock 9
OCTET=""
for _ in $(seq 1 100); do
  o=$(( 100 + RANDOM % 140 ))
  if ! taken "$o"; then OCTET=$o; break; fi
done
[ -n "$OCTET" ] || { echo "node-netns: no free 10.O.0.0/16 found" >&2; exit 1; }
TAG=""
for _ in $(seq 1 100); do
  t=$(printf '%04x' $(( RANDOM % 65536 )))
  if ! ip link show "phb$t" >/dev/null 2>&1 && ! ls /run/netns 2>/dev/null | grep -q "^phn-$t-"; then TAG=$t; break; fi
done
[ -n "$TAG" ] || { echo "node-netns: no free name tag" >&2; exit 1; }

BRIDGE=phb$TAG
HOST_ADDR=10.$OCTET.0.1
ip link add "$BRIDGE" type bridge
echo "link $BRIDGE" >>"$DIR/netns.state"
ip addr add "$HOST_ADDR/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
flock -u 9   # the bridge's route now marks the /16 taken for other runs

{
  echo "# written by node-netns.sh up; remove with node-netns.sh down $DIR"
  echo "HOST_ADDR=$HOST_ADDR"
  echo "CLUSTER_CIDR=10.$OCTET.128.0/17"
  echo "SERVICE_CIDR=10.$OCTET.64.0/20"
  echo "declare -A NODE_NETNS NODE_ADDR NODE_POD_CIDR"
} >"$DIR/netns.env"
i=0
for NODE in "${NODES[@]}"; do
  i=$((i + 1))
  ns=phn-$TAG-$i
  hv=phv$TAG-$i
  addr=10.$OCTET.0.$((i + 1))
  ip netns add "$ns"
  echo "netns $ns" >>"$DIR/netns.state"
  ip link add "$hv" type veth peer name eth0 netns "$ns"
  echo "link $hv" >>"$DIR/netns.state"
  ip link set "$hv" master "$BRIDGE" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via "$HOST_ADDR"
  # gone with the bridge at `down` (its next hop's link)
  ip route add "10.$OCTET.$((10 + i)).0/24" via "$addr" dev "$BRIDGE"
  echo "NODE_NETNS[$NODE]=$ns; NODE_ADDR[$NODE]=$addr; NODE_POD_CIDR[$NODE]=10.$OCTET.$((10 + i)).0/24" >>"$DIR/netns.env"
done
# the bridge answers as soon as the nodes' links are up (no STP delay on a new bridge)
for NODE in "${NODES[@]}"; do
  ns=$(grep -o "NODE_NETNS\[$NODE\]=[^;]*" "$DIR/netns.env" | cut -d= -f2)
  for t in $(seq 1 50); do
    nsenter --net="/run/netns/$ns" busybox ping -c1 -W1 "$HOST_ADDR" >/dev/null 2>&1 && break
    [ "$t" = 50 ] && { echo "node-netns: $NODE ($ns) cannot reach $HOST_ADDR" >&2; exit 1; }
    sleep 0.1
  done
done
cat "$DIR/netns.env"
