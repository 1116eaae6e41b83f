# shellcheck shell=bash
# 85-pod-network: the built-in bridge on Debian 12's kernel. Two pods get an IPv4 and an
# IPv6 address on podhost0 and reach each other over both; a hostPort on the node's
# 127.0.0.1 reaches a pod through podhost's nftables table (nft and the nf_tables
# modules are in the guest); a removed pod leaves no veth, hostPort rule or IPAM entry.

server() {
  apply_manifest "$1.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "mkdir -p /www && echo $1 > /www/index.html && exec httpd -f -p 8080 -h /www"]
    ports: $2
YAML
}

server neta '[{containerPort: 8080, hostPort: 18080}]'
server netb '[]'
a=neta-$NODE
b=netb-$NODE
wait_phase "$a" Running 60
wait_phase "$b" Running 60
a4=$(pod_field "$a" status.podIPs.0.ip)
a6=$(pod_field "$a" status.podIPs.1.ip)
info "pod $a: $a4 $a6"
case "$a4" in 10.86.*) ;; *) fail "pod $a has no address in 10.86.0.0/16: '$a4'" ;; esac
case "$a6" in fd70:6f64:6800:*) ;; *) fail "pod $a has no address in fd70:6f64:6800::/64: '$a6'" ;; esac

# (No wget -T: busybox 1.35's static wget crashes with it.)
got() { podhost_cli exec "$b" -c main -- wget -q -O - "$1" 2>&1; }
# What the pods and the node see, when a request fails.
explain() {
  info "netb: $(podhost_cli exec "$b" -c main -- sh -c 'ip addr; ip route; ip -6 route' 2>&1)"
  info "neta: $(podhost_cli exec "$a" -c main -- sh -c 'ip addr; netstat -ltn' 2>&1)"
  info "node: $(ip addr 2>&1; ip link 2>&1)"
  info "nft: $(nft list ruleset 2>&1)"
}
answer=
for _ in $(seq 40); do
  answer=$(got "http://$a4:8080/")
  [ "$answer" = neta ] && break
  sleep 0.5
done
[ "$answer" = neta ] || { explain; fail "pod → pod over IPv4: '$answer'"; }
answer=$(got "http://[$a6]:8080/")
[ "$answer" = neta ] || { explain; fail "pod → pod over IPv6: '$answer'"; }

table=$(nft list table inet podhost 2>&1) || fail "no nftables table inet podhost: $table"
printf '%s\n' "$table" | grep -q 18080 || fail "no hostPort rule for 18080 in: $table"
wait_until 20 "the hostPort on 127.0.0.1 to answer" sh -c '[ "$(wget -q -O - http://127.0.0.1:18080/ 2>/dev/null)" = neta ]'

delete_manifest neta.yaml
delete_manifest netb.yaml
wait_pod_gone "$a" 60
wait_pod_gone "$b" 60
left=$(ls -d /sys/class/net/veth* 2>/dev/null)
[ -z "$left" ] || fail "veths left after the pods went: $left"
nft list table inet podhost | grep -q 18080 && fail "the hostPort rule outlived its pod"
# An address held is a file named after it under <network>/ipam/<range>/.
entries=$(find "$PODHOST_ROOT/network" -path '*/ipam/*' -type f ! -name last_reserved_ip 2>/dev/null)
[ -z "$entries" ] || fail "IPAM entries left: $entries"
records=$(find "$PODHOST_ROOT/network" -path '*/pods/*' -type f 2>/dev/null)
[ -z "$records" ] || fail "pod network records left: $records"
info "pod network released"
