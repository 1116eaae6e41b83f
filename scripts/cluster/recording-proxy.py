#!/usr/bin/env python3
"""A TLS-terminating recording proxy for one kubectl command.

Listens on 127.0.0.1:PORT with CERT/KEY (kubectl is pointed at it with
insecure-skip-tls-verify), opens one TLS connection to UPSTREAM (host:port) per client
connection with the admin client certificate, copies bytes both ways unchanged and
appends every chunk to OUT as a JSON line:
  {"conn": N, "from": "client"|"server", "ms": <since the connection began>, "b64": ...}
Used by record-exec-spdy-fixture.sh to keep what a real kubectl sends over SPDY.
Stops when it gets SIGTERM.
"""
import argparse
import base64
import json
import socket
import ssl
import threading
import time

lock = threading.Lock()


def record(out, conn, who, start, data):
    line = json.dumps({"conn": conn, "from": who, "ms": round((time.monotonic() - start) * 1000, 1),
                       "b64": base64.b64encode(data).decode()})
    with lock:
        out.write(line + "\n")
        out.flush()


def pump(src, dst, out, conn, who, start):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            record(out, conn, who, start, data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(client, n, args, out):
    start = time.monotonic()
    up_ctx = ssl.create_default_context(cafile=args.ca)
    up_ctx.load_cert_chain(args.client_cert, args.client_key)
    host, port = args.upstream.rsplit(":", 1)
    raw = socket.create_connection((host, int(port)))
    # kubectl writes a SPDY frame in several small records: without NODELAY each would
    # wait for the previous one's (delayed) ACK here, and the recording would show 40 ms
    # the real path does not have.
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    upstream = up_ctx.wrap_socket(raw, server_hostname=host)
    a = threading.Thread(target=pump, args=(client, upstream, out, n, "client", start))
    b = threading.Thread(target=pump, args=(upstream, client, out, n, "server", start))
    a.start(); b.start(); a.join(); b.join()
    client.close(); upstream.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--client-cert", required=True)
    p.add_argument("--client-key", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    # HTTP/1.1 only: the upgrade to SPDY exists only there.
    ctx.set_alpn_protocols(["http/1.1"])
    listener = socket.create_server(("127.0.0.1", args.port))
    out = open(args.out, "a")
    n = 0
    while True:
        raw, _ = listener.accept()
        n += 1
        try:
            client = ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            continue
        threading.Thread(target=serve, args=(client, n, args, out), daemon=True).start()


if __name__ == "__main__":
    main()
