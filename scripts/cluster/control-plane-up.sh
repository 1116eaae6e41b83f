#!/bin/bash
# scripts/cluster/control-plane-up.sh DIR NODE...
#
# Starts a loopback-only Kubernetes control plane for podhost's cluster-mode tests:
# etcd ($ETCD, default the one build-control-plane.sh builds beside kube-apiserver, else
# the machine's) and the kube-apiserver binary $KUBE_APISERVER (built by
# scripts/cluster/build-control-plane.sh), with `Node,RBAC` authorization and the
# NodeRestriction admission, kube-controller-manager when $KUBE_CONTROLLER_MANAGER names
# one and kube-scheduler when $KUBE_SCHEDULER does.
#
# Releases: written for Kubernetes 1.24 and later (1.24 removed the API server's
# --insecure-port and the controller manager's --port, which it no longer passes);
# tested with the one pinned in tests/cluster/controlplane/go.mod (v1.36.3).
# Certificates, kubeconfigs (admin, and one per NODE as system:node:NODE), data and logs
# live in DIR; DIR/env.sh has the exports. Stop with control-plane-down.sh.
#
# Optional environment:
#   API_ADDRESS   the address the API server binds and advertises (default 127.0.0.1):
#                 the host side of node-netns.sh's bridge, for nodes in their own network
#                 namespaces; it is in the serving certificate and every kubeconfig.
#   NODE_IPS      "NODE=IP ..." each node's --node-ip, put in its kubelet serving
#                 certificate (default: NODE_IP, default 127.0.0.1, for every node).
#   CLUSTER_CIDR  with the controller manager: --allocate-node-cidrs --cluster-cidr
#                 CLUSTER_CIDR (/24 per Node, in spec.podCIDR).
#   ENDPOINT_RECONCILER  the API server's --endpoint-reconciler-type (default none: the
#                 `kubernetes` Service has no endpoints); `lease` with a non-loopback
#                 API_ADDRESS when the nodes proxy Services.
#   SERVICE_CIDR  the Services' IPv4 range (default 10.96.0.0/16; its network address
#                 must end in .0): node-netns.sh gives each run its own, routable one.
#   BOOTSTRAP_TOKEN=<6 chars>.<16 chars>  TLS bootstrap as `kubeadm join` uses it: the API
#     server gets --enable-bootstrap-token-auth, the token's Secret is created in
#     kube-system with kubeadm's RBAC bindings (system:bootstrappers may create node CSRs,
#     which kube-controller-manager auto-approves; nodes may renew their own), and
#     DIR/bootstrap.kubeconfig holds the token.
#   CLUSTER_SIGNING_DURATION=<Go duration>  kube-controller-manager's
#     --cluster-signing-duration (the lifetime of the certificates it signs; its default,
#     a year, when unset): a short one makes a node's certificate rotation observable.
#   KCM_EXTRA_ARGS="--flag=value ..."  more flags for kube-controller-manager, split on
#     whitespace and appended after the others (a flag given twice: the last one wins),
#     e.g. "--node-monitor-grace-period=16s" to see a dead node NotReady within seconds.
#   APISERVER_EXTRA_ARGS="--flag=value ..."  the same for kube-apiserver, e.g. an audit
#     log that counts each node's requests (scripts/bench-kubelet.sh).
set -euo pipefail

usage() { echo "usage: $0 DIR NODE..." >&2; exit 2; }
[ $# -ge 2 ] || usage
DIR=$1; shift
NODES=("$@")
HERE=$(cd "$(dirname "$0")" && pwd)
KUBE_APISERVER=${KUBE_APISERVER:?set KUBE_APISERVER to a kube-apiserver binary}
KUBE_CONTROLLER_MANAGER=${KUBE_CONTROLLER_MANAGER:-}
KUBE_SCHEDULER=${KUBE_SCHEDULER:-}
BOOTSTRAP_TOKEN=${BOOTSTRAP_TOKEN:-}
CLUSTER_SIGNING_DURATION=${CLUSTER_SIGNING_DURATION:-}
KCM_EXTRA=()
read -r -a KCM_EXTRA <<<"${KCM_EXTRA_ARGS:-}"
APISERVER_EXTRA=()
read -r -a APISERVER_EXTRA <<<"${APISERVER_EXTRA_ARGS:-}"
if [ -n "$BOOTSTRAP_TOKEN" ]; then
  [[ "$BOOTSTRAP_TOKEN" =~ ^([a-z0-9]{6})\.([a-z0-9]{16})$ ]] || { echo "BOOTSTRAP_TOKEN must look like abcdef.0123456789abcdef" >&2; exit 2; }
  TOKEN_ID=${BASH_REMATCH[1]}; TOKEN_SECRET=${BASH_REMATCH[2]}
fi
# etcd: the one build-control-plane.sh builds beside kube-apiserver (the version the
# release pins), else the machine's.
if [ -z "${ETCD:-}" ]; then
  ETCD=$(dirname "$KUBE_APISERVER")/etcd
  [ -x "$ETCD" ] || ETCD=$(command -v etcd || true)
fi
NODE_IP=${NODE_IP:-127.0.0.1}
API_ADDRESS=${API_ADDRESS:-127.0.0.1}
NODE_IPS=${NODE_IPS:-}
CLUSTER_CIDR=${CLUSTER_CIDR:-}
if [ -z "${WITH_KCM:-}" ]; then
  if [ -x "$KUBE_CONTROLLER_MANAGER" ]; then WITH_KCM=1; else WITH_KCM=0; fi
fi

[ -x "$KUBE_APISERVER" ] || { echo "kube-apiserver not found at $KUBE_APISERVER " >&2; exit 1; }
[ -n "$ETCD" ] && [ -x "$ETCD" ] || { echo "etcd not found (apt-get install etcd-server)" >&2; exit 1; }
command -v openssl >/dev/null || { echo "openssl not found" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl not found" >&2; exit 1; }
# RFC 1123 subdomain, as Kubernetes requires for node names
for NODE in "${NODES[@]}"; do
  [[ "$NODE" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$ ]] || { echo "bad node name: $NODE" >&2; exit 2; }
done

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
if [ -e "$DIR/apiserver.pid" ] || [ -e "$DIR/etcd.pid" ]; then
  echo "$DIR already has a cluster (pid files present); run stop-cluster.sh $DIR first" >&2; exit 1
fi
touch "$DIR/.podhost-control-plane"   # marker: stop-cluster.sh only deletes dirs carrying it
# on any failure: stop whatever was started, keep DIR (logs) for inspection
trap 'rc=$?; if [ $rc -ne 0 ]; then echo "start failed; stopping what was started (DIR kept: $DIR)" >&2; "$HERE/control-plane-down.sh" "$DIR" --keep; fi' EXIT
PKI=$DIR/pki; mkdir -p "$PKI" "$DIR/logs"

# ---------- free loopback ports ----------
# A port is taken by a socket in any state, not only LISTEN: a connected or TIME-WAIT socket
# holding it as its local port (e.g. an earlier run's apiserver->etcd or curl->etcd
# connections) makes bind() fail with EADDRINUSE, and `ss -tln` does not show those. Ports
# inside ip_local_port_range can also be taken as a connect() source port between this check
# and the server's bind, so pick below that range, where the kernel never auto-assigns.
port_in_use() { ss -Htan "sport = :$1" 2>/dev/null | grep -q . ; }
read -r EPHEMERAL_LOW _ < /proc/sys/net/ipv4/ip_local_port_range
PORT_LOW=10000; PORT_HIGH=$(( EPHEMERAL_LOW - 1 ))
[ "$PORT_HIGH" -gt $(( PORT_LOW + 1000 )) ] || { PORT_LOW=20000; PORT_HIGH=49999; }
pick_port() {
  local p
  for _ in $(seq 1 200); do
    p=$(( PORT_LOW + RANDOM % (PORT_HIGH - PORT_LOW + 1) ))
    case " ${PICKED:-} " in *" $p "*) continue;; esac
    if ! port_in_use "$p"; then PICKED="${PICKED:-} $p"; echo "$p"; return 0; fi
  done
  echo "no free port found" >&2; return 1
}
PICKED=""
ETCD_CLIENT_PORT=$(pick_port); PICKED="$PICKED $ETCD_CLIENT_PORT"
ETCD_PEER_PORT=$(pick_port);   PICKED="$PICKED $ETCD_PEER_PORT"
API_PORT=$(pick_port);         PICKED="$PICKED $API_PORT"
KCM_PORT=$(pick_port);         PICKED="$PICKED $KCM_PORT"
SCHED_PORT=$(pick_port);       PICKED="$PICKED $SCHED_PORT"
SERVER=https://$API_ADDRESS:$API_PORT

# ---------- certificates (openssl) ----------
ossl() { openssl "$@" 2>>"$DIR/logs/openssl.log"; }
ossl req -x509 -newkey rsa:2048 -nodes -sha256 -days 365 \
  -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -subj "/CN=podhost-local-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"

# sign NAME SUBJECT EXTKEYUSAGE [SAN]
sign() {
  local name=$1 subj=$2 eku=$3 san=${4:-}
  local ext="$PKI/$name.ext"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } > "$ext"
  ossl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -out "$PKI/$name.csr" -subj "$subj"
  ossl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 365 -sha256 -extfile "$ext" -out "$PKI/$name.crt"
  rm -f "$PKI/$name.csr" "$ext"
}
# The Services' addresses: an allocation range inside the apiserver; a run that proxies
# them (kube-proxy-up.sh) routes it to a node. IPv4 with a network address ending in .0:
# the first address is the `kubernetes` Service's.
SVC_CIDR=${SERVICE_CIDR:-10.96.0.0/16}
SVC_IP=${SVC_CIDR%.*/*}.1
# The `kubernetes` Service's endpoints: none by default (an EndpointSlice cannot hold
# 127.0.0.1, the default API_ADDRESS); `lease` (the API server's own default) publishes
# API_ADDRESS:port there, for clusters whose pods reach the Service (kube-proxy-up.sh).
ENDPOINT_RECONCILER=${ENDPOINT_RECONCILER:-none}
sign apiserver "/CN=kube-apiserver" serverAuth \
  "IP:127.0.0.1,IP:::1,IP:$API_ADDRESS,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:$SVC_IP"
sign admin "/O=system:masters/CN=admin" clientAuth
# node_ip NODE: its address from NODE_IPS, else NODE_IP
node_ip() {
  local pair
  for pair in $NODE_IPS; do [ "${pair%%=*}" = "$1" ] && { echo "${pair#*=}"; return; }; done
  echo "$NODE_IP"
}
for NODE in "${NODES[@]}"; do
  sign "node-$NODE" "/O=system:nodes/CN=system:node:$NODE" clientAuth
  sign "kubelet-$NODE" "/O=system:nodes/CN=system:node:$NODE" serverAuth \
    "DNS:$NODE,DNS:localhost,IP:127.0.0.1,IP:$(node_ip "$NODE")"
done
# client cert the apiserver presents to kubelets (logs/exec/port-forward via :10250)
sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
sign kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
sign kube-scheduler "/CN=system:kube-scheduler" clientAuth
# The aggregation layer (metrics-server's metrics.k8s.io behind the API server): its own
# CA for the front proxy's client certificate, as kubeadm makes it.
ossl req -x509 -newkey rsa:2048 -nodes -sha256 -days 365 \
  -keyout "$PKI/front-proxy-ca.key" -out "$PKI/front-proxy-ca.crt" -subj "/CN=podhost-front-proxy-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
ossl req -new -newkey rsa:2048 -nodes -keyout "$PKI/front-proxy-client.key" -out "$PKI/front-proxy-client.csr" \
  -subj "/CN=front-proxy-client"
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' \
  >"$PKI/front-proxy-client.ext"
ossl x509 -req -in "$PKI/front-proxy-client.csr" -CA "$PKI/front-proxy-ca.crt" -CAkey "$PKI/front-proxy-ca.key" \
  -CAcreateserial -days 365 -sha256 -extfile "$PKI/front-proxy-client.ext" -out "$PKI/front-proxy-client.crt"
rm -f "$PKI/front-proxy-client.csr" "$PKI/front-proxy-client.ext"
# service-account token signing key pair
ossl genrsa -out "$PKI/sa.key" 2048
ossl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"
chmod 600 "$PKI"/*.key

# ---------- kubeconfigs ----------
b64() { base64 -w0 < "$1"; }
kubeconfig() { # FILE USER CERT KEY
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $SERVER
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(b64 "$3")
    client-key-data: $(b64 "$4")
contexts:
- name: $2@local
  context:
    cluster: local
    user: $2
current-context: $2@local
EOF
  chmod 600 "$1"
}
kubeconfig "$DIR/admin.kubeconfig" admin "$PKI/admin.crt" "$PKI/admin.key"
for NODE in "${NODES[@]}"; do
  kubeconfig "$DIR/node-$NODE.kubeconfig" "system:node:$NODE" "$PKI/node-$NODE.crt" "$PKI/node-$NODE.key"
done
kubeconfig "$DIR/kube-controller-manager.kubeconfig" system:kube-controller-manager \
  "$PKI/kube-controller-manager.crt" "$PKI/kube-controller-manager.key"
kubeconfig "$DIR/kube-scheduler.kubeconfig" system:kube-scheduler \
  "$PKI/kube-scheduler.crt" "$PKI/kube-scheduler.key"

# ---------- etcd ----------
mkdir -p "$DIR/etcd-data"; chmod 700 "$DIR/etcd-data"
setsid "$ETCD" --name podhost-local --data-dir "$DIR/etcd-data" \
  --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "podhost-local=http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster-state new --initial-cluster-token "podhost-$$" \
  </dev/null >"$DIR/logs/etcd.log" 2>&1 &
echo $! > "$DIR/etcd.pid"
# Generous limits: on a loaded 2-core machine (CI runs a VM beside this) etcd's first
# fsyncs and the API server's start have each taken many times their usual second.
etcd_deadline=$((SECONDS + 90))
while :; do
  curl -fsS "http://127.0.0.1:$ETCD_CLIENT_PORT/health" 2>/dev/null | grep -q '"health":"true"' && break
  kill -0 "$(cat "$DIR/etcd.pid")" 2>/dev/null || { echo "etcd died; see $DIR/logs/etcd.log" >&2; tail -20 "$DIR/logs/etcd.log" >&2; exit 1; }
  [ "$SECONDS" -lt "$etcd_deadline" ] || { echo "etcd not healthy after 90s; its log:" >&2; tail -20 "$DIR/logs/etcd.log" >&2; exit 1; }
  sleep 0.2
done

# ---------- kube-apiserver ----------
# Its command line is kept in DIR/apiserver.cmd (NUL-separated) so that
# restart-apiserver.sh can start the same server again.
APISERVER_ARGS=(
  --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT"
  --bind-address="$API_ADDRESS" --advertise-address="$API_ADDRESS" --secure-port="$API_PORT"
  --endpoint-reconciler-type="$ENDPOINT_RECONCILER"
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key"
  --client-ca-file="$PKI/ca.crt"
  --authorization-mode=Node,RBAC
  --enable-admission-plugins=NodeRestriction
  --allow-privileged=true
  --service-cluster-ip-range="$SVC_CIDR"
  --service-account-issuer=https://kubernetes.default.svc.cluster.local
  --api-audiences=https://kubernetes.default.svc.cluster.local
  --service-account-key-file="$PKI/sa.pub"
  --service-account-signing-key-file="$PKI/sa.key"
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt"
  --kubelet-client-key="$PKI/apiserver-kubelet-client.key"
  --kubelet-certificate-authority="$PKI/ca.crt"
  --kubelet-preferred-address-types=InternalIP,Hostname,ExternalIP
  --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client
  --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group
  --requestheader-extra-headers-prefix=X-Remote-Extra-
  --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key"
  --enable-aggregator-routing=true
  --cert-dir="$DIR/apiserver-certs"
  --profiling=false
  --v=1
)
[ -z "$BOOTSTRAP_TOKEN" ] || APISERVER_ARGS+=(--enable-bootstrap-token-auth=true)
APISERVER_ARGS+=("${APISERVER_EXTRA[@]}")
printf '%s\0' "$KUBE_APISERVER" "${APISERVER_ARGS[@]}" >"$DIR/apiserver.cmd"
setsid "$KUBE_APISERVER" "${APISERVER_ARGS[@]}" </dev/null >"$DIR/logs/kube-apiserver.log" 2>&1 &
echo $! > "$DIR/apiserver.pid"
apiserver_deadline=$((SECONDS + 180))
while :; do
  if curl -fsS --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
       "$SERVER/readyz" 2>/dev/null | grep -q '^ok$'; then break; fi
  kill -0 "$(cat "$DIR/apiserver.pid")" 2>/dev/null || { echo "kube-apiserver died; see $DIR/logs/kube-apiserver.log" >&2; tail -30 "$DIR/logs/kube-apiserver.log" >&2; exit 1; }
  [ "$SECONDS" -lt "$apiserver_deadline" ] || { echo "kube-apiserver not ready after 180s; its log:" >&2; tail -30 "$DIR/logs/kube-apiserver.log" >&2; exit 1; }
  sleep 0.2
done

# ---------- TLS bootstrap (optional): the token, kubeadm's bindings, the kubeconfig ----------
if [ -n "$BOOTSTRAP_TOKEN" ]; then
  admin_post() { # PATH JSON
    curl -fsS -o /dev/null --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
      -H 'Content-Type: application/json' -X POST "$SERVER$1" -d "$2"
  }
  admin_post /api/v1/namespaces/kube-system/secrets '{"apiVersion":"v1","kind":"Secret",
    "metadata":{"name":"bootstrap-token-'"$TOKEN_ID"'","namespace":"kube-system"},
    "type":"bootstrap.kubernetes.io/token",
    "stringData":{"token-id":"'"$TOKEN_ID"'","token-secret":"'"$TOKEN_SECRET"'",
      "usage-bootstrap-authentication":"true","usage-bootstrap-signing":"true",
      "auth-extra-groups":"system:bootstrappers:kubeadm:default-node-token"}}'
  binding() { # NAME CLUSTERROLE GROUP
    admin_post /apis/rbac.authorization.k8s.io/v1/clusterrolebindings '{"apiVersion":"rbac.authorization.k8s.io/v1",
      "kind":"ClusterRoleBinding","metadata":{"name":"'"$1"'"},
      "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"'"$2"'"},
      "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"'"$3"'"}]}'
  }
  binding kubeadm:kubelet-bootstrap system:node-bootstrapper system:bootstrappers:kubeadm:default-node-token
  binding kubeadm:node-autoapprove-bootstrap system:certificates.k8s.io:certificatesigningrequests:nodeclient \
    system:bootstrappers:kubeadm:default-node-token
  binding kubeadm:node-autoapprove-certificate-rotation \
    system:certificates.k8s.io:certificatesigningrequests:selfnodeclient system:nodes
  cat > "$DIR/bootstrap.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $SERVER
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: tls-bootstrap-token-user
  user:
    token: $BOOTSTRAP_TOKEN
contexts:
- name: tls-bootstrap-token-user@local
  context:
    cluster: local
    user: tls-bootstrap-token-user
current-context: tls-bootstrap-token-user@local
EOF
  chmod 600 "$DIR/bootstrap.kubeconfig"
fi

# ---------- kube-controller-manager (optional) ----------
if [ "$WITH_KCM" = 1 ]; then
  [ -x "$KUBE_CONTROLLER_MANAGER" ] || { echo "kube-controller-manager not found at $KUBE_CONTROLLER_MANAGER" >&2; exit 1; }
  KCM_CIDRS=()
  [ -n "$CLUSTER_CIDR" ] && KCM_CIDRS=(--allocate-node-cidrs=true --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size=24)
  setsid "$KUBE_CONTROLLER_MANAGER" "${KCM_CIDRS[@]}" \
    --kubeconfig="$DIR/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$DIR/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$DIR/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
    --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" \
    --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    ${CLUSTER_SIGNING_DURATION:+--cluster-signing-duration="$CLUSTER_SIGNING_DURATION"} \
    --service-cluster-ip-range="$SVC_CIDR" \
    --controllers='*,-cloud-node-lifecycle,-route,-service' \
    --cert-dir="$DIR/kcm-certs" \
    --profiling=false --v=1 \
    "${KCM_EXTRA[@]}" \
    </dev/null >"$DIR/logs/kube-controller-manager.log" 2>&1 &
  echo $! > "$DIR/kcm.pid"
  sleep 1
  kill -0 "$(cat "$DIR/kcm.pid")" 2>/dev/null || { echo "kube-controller-manager died; see $DIR/logs/kube-controller-manager.log" >&2; exit 1; }
fi

# ---------- kube-scheduler (optional) ----------
if [ -n "$KUBE_SCHEDULER" ]; then
  [ -x "$KUBE_SCHEDULER" ] || { echo "kube-scheduler not found at $KUBE_SCHEDULER" >&2; exit 1; }
  setsid "$KUBE_SCHEDULER" \
    --kubeconfig="$DIR/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$DIR/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$DIR/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" \
    --leader-elect=false --profiling=false --v=1 \
    </dev/null >"$DIR/logs/kube-scheduler.log" 2>&1 &
  echo $! > "$DIR/scheduler.pid"
  sleep 1
  kill -0 "$(cat "$DIR/scheduler.pid")" 2>/dev/null || { echo "kube-scheduler died; see $DIR/logs/kube-scheduler.log" >&2; exit 1; }
fi

cat > "$DIR/env.sh" <<EOF
export KUBECONFIG=$DIR/admin.kubeconfig
export PODHOST_ADMIN_KUBECONFIG=$DIR/admin.kubeconfig
export KUBE_APISERVER_URL=$SERVER
export KUBE_CA_FILE=$PKI/ca.crt
export KUBE_API_ADDRESS=$API_ADDRESS
export ETCD_ENDPOINT=http://127.0.0.1:$ETCD_CLIENT_PORT
EOF
if [ -n "$BOOTSTRAP_TOKEN" ]; then echo "export BOOTSTRAP_KUBECONFIG=$DIR/bootstrap.kubeconfig" >> "$DIR/env.sh"; fi
cat "$DIR/env.sh"
echo "# cluster up: kube-apiserver $SERVER (pid $(cat "$DIR/apiserver.pid")), etcd 127.0.0.1:$ETCD_CLIENT_PORT (pid $(cat "$DIR/etcd.pid"))$( [ "$WITH_KCM" = 1 ] && echo ", kube-controller-manager (pid $(cat "$DIR/kcm.pid"))")$( [ -n "$KUBE_SCHEDULER" ] && echo ", kube-scheduler (pid $(cat "$DIR/scheduler.pid"))"); logs in $DIR/logs; stop with: $HERE/control-plane-down.sh $DIR" >&2
