#!/usr/bin/env python3
"""scripts/cluster/ws-log.py URL CA CERT KEY — a pod's log read over a websocket from the
API server, as Kubernetes' e2e framework reads it (`binary.k8s.io`): prints the
payloads of the binary frames until the server closes, exits 1 if it refused the
upgrade. Standard library only (the test hosts have no websocket module)."""
import base64
import os
import socket
import ssl
import sys
from urllib.parse import urlsplit


def frames(sock):
    buf = b""

    def need(n):
        nonlocal buf
        while len(buf) < n:
            chunk = sock.recv(65536)
            if not chunk:
                raise EOFError
            buf += chunk
        out, buf = buf[:n], buf[n:]
        return out

    while True:
        head = need(2)
        opcode, size = head[0] & 0x0F, head[1] & 0x7F
        if size == 126:
            size = int.from_bytes(need(2), "big")
        elif size == 127:
            size = int.from_bytes(need(8), "big")
        payload = need(size)
        if opcode == 8:
            return
        yield opcode, payload


def main():
    url, ca, cert, key = sys.argv[1:5]
    parts = urlsplit(url)
    ctx = ssl.create_default_context(cafile=ca)
    ctx.load_cert_chain(cert, key)
    raw = socket.create_connection((parts.hostname, parts.port), timeout=20)
    sock = ctx.wrap_socket(raw, server_hostname=parts.hostname)
    nonce = base64.b64encode(os.urandom(16)).decode()
    path = parts.path + ("?" + parts.query if parts.query else "")
    sock.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {nonce}\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Protocol: binary.k8s.io\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    status = head.split(b"\r\n", 1)[0]
    if b" 101 " not in status:
        print(f"ws-log: upgrade refused: {status.decode(errors='replace')}", file=sys.stderr)
        sys.exit(1)
    try:
        for opcode, payload in frames(sock):
            if opcode == 2:
                sys.stdout.buffer.write(payload)
    except EOFError:
        pass


if __name__ == "__main__":
    main()
