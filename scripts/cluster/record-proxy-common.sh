# scripts/cluster/record-proxy-common.sh — sourced after record-common.sh by the
# record-*-fixture.sh scripts that keep what a real kubectl sends through the API server
# to the node's kubelet API (exec, port-forward): the node's kubelet API flags, a
# TLS-terminating recording proxy (recording-proxy.py) kubectl is pointed at, and the
# recorded connections kept. The kubelet API flags (record_kubelet_flags) are in
# record-common.sh.

# Starts the proxy recording into $WORK/proxy.jsonl and writes $WORK/proxy.kubeconfig
# for kubectl: a throw-away serving certificate; kubectl's token is a placeholder that
# keeps it from prompting for a password (the API server takes the proxy's admin
# certificate). POD is deleted (stopped by its node) before the cleanup.
record_start_proxy() { # POD
  local pki=$WORK/cp/pki port
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -keyout "$WORK/proxy.key" -out "$WORK/proxy.crt" >/dev/null 2>&1
  port=$(free_port)
  python3 scripts/cluster/recording-proxy.py --port "$port" --cert "$WORK/proxy.crt" --key "$WORK/proxy.key" \
    --upstream "${KUBE_APISERVER_URL#https://}" --ca "$KUBE_CA_FILE" \
    --client-cert "$pki/admin.crt" --client-key "$pki/admin.key" --out "$WORK/proxy.jsonl" &
  PROXY=$!
  RECORD_POD=$1
  # A killed node would leave the pod running: the node stops it first.
  trap 'kill $PROXY 2>/dev/null || true; timeout 40 "$KUBECTL" --kubeconfig "$KUBECONFIG" delete pod "$RECORD_POD" --grace-period=1 --timeout=30s >/dev/null 2>&1 || true; record_cleanup' EXIT
  wait_for 10 bash -c "ss -Htln 'sport = :$port' | grep -q ."
  cat >"$WORK/proxy.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: "https://127.0.0.1:$port", insecure-skip-tls-verify: true}}]
users: [{name: proxy, user: {token: not-used-the-proxy-authenticates}}]
contexts: [{name: proxy, context: {cluster: proxy, user: proxy}}]
current-context: proxy
YAML
}

# Stops the proxy and keeps, in OUT, only the connections whose request contains MARKER
# (kubectl's discovery requests went through the proxy too).
record_keep_connections() { # MARKER OUT
  kill "$PROXY"; wait "$PROXY" 2>/dev/null || true
  mkdir -p "$(dirname "$2")"
  python3 - "$WORK/proxy.jsonl" "$2" "$1" <<'PY'
import base64, json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
marker = sys.argv[3].encode()
keep = {r["conn"] for r in rows if r["from"] == "client" and marker in base64.b64decode(r["b64"])}
with open(sys.argv[2], "w") as out:
    for r in rows:
        if r["conn"] in keep:
            out.write(json.dumps(r) + "\n")
PY
  echo "recorded $(grep -c '"from": "client"' "$2") client and $(grep -c '"from": "server"' "$2") server chunks into $2"
}
