"""A login storm for #41: CLIENTS threads log in over SCRAM-SHA-256 at once and keep logging in
again (startup, SCRAM exchange, ReadyForQuery, Terminate) until SECONDS have passed.

    python3 perf/login_storm.py HOST PORT USER PASSWORD DBNAME CLIENTS SECONDS

The client keeps each (salt, iterations)'s salted password, so after the first login with a
salt a login costs it a few HMACs: what the storm measures is the server's work, not the
load generator's PBKDF2. Prints the logins completed, the failures (with the first error) and
the login latency's p50/p99 in ms.
"""
import base64
import hashlib
import hmac
import os
import socket
import struct
import sys
import threading
import time

HOST, PORT, USER, PASSWORD, DB = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
CLIENTS, SECONDS = int(sys.argv[6]), float(sys.argv[7])
salted = {}
lock = threading.Lock()
done, failures, latencies, first_error = [0], [0], [], []


def message(tag, body):
    return tag + struct.pack("!i", len(body) + 4) + body


def read_message(s):
    head = recv_exact(s, 5)
    length = struct.unpack("!i", head[1:])[0]
    return head[:1], recv_exact(s, length - 4)


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed by the server")
        out += chunk
    return out


def salted_password(salt, iterations):
    key = (salt, iterations)
    with lock:
        known = salted.get(key)
    if known is None:
        known = hashlib.pbkdf2_hmac("sha256", PASSWORD.encode(), salt, iterations)
        with lock:
            salted[key] = known
    return known


def expect_auth(s, code):
    tag, body = read_message(s)
    if tag == b"E":
        raise RuntimeError(body.decode(errors="replace"))
    got = struct.unpack("!i", body[:4])[0]
    if tag != b"R" or got != code:
        raise RuntimeError(f"expected authentication {code}, got {tag!r} {got}")
    return body[4:]


def login():
    s = socket.create_connection((HOST, PORT))
    try:
        params = f"user\0{USER}\0database\0{DB}\0\0".encode()
        s.sendall(struct.pack("!ii", len(params) + 8, 196608) + params)
        expect_auth(s, 10)  # AuthenticationSASL
        nonce = base64.b64encode(os.urandom(18)).decode()
        first_bare = f"n=,r={nonce}"
        first = ("n,," + first_bare).encode()
        s.sendall(message(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first))
        server_first = expect_auth(s, 11).decode()
        fields = dict(f.split("=", 1) for f in server_first.split(","))
        key = salted_password(base64.b64decode(fields["s"]), int(fields["i"]))
        final_bare = f"c=biws,r={fields['r']}"
        auth_message = f"{first_bare},{server_first},{final_bare}".encode()
        client_key = hmac.digest(key, b"Client Key", "sha256")
        signature = hmac.digest(hashlib.sha256(client_key).digest(), auth_message, "sha256")
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        s.sendall(message(b"p", f"{final_bare},p={base64.b64encode(proof).decode()}".encode()))
        expect_auth(s, 12)  # SASLFinal
        expect_auth(s, 0)  # AuthenticationOk
        while True:
            tag, body = read_message(s)
            if tag == b"Z":
                break
            if tag == b"E":
                raise RuntimeError(body.decode(errors="replace"))
        s.sendall(message(b"X", b""))
    finally:
        s.close()


def client(start, until):
    start.wait()
    while time.time() < until:
        began = time.perf_counter()
        try:
            login()
        except Exception as e:  # noqa: BLE001 - every failure is counted and the first shown
            with lock:
                failures[0] += 1
                if not first_error:
                    first_error.append(repr(e))
            time.sleep(0.05)
            continue
        elapsed = time.perf_counter() - began
        with lock:
            done[0] += 1
            latencies.append(elapsed)


start = threading.Barrier(CLIENTS)
until = time.time() + SECONDS
threads = [threading.Thread(target=client, args=(start, until), daemon=True) for _ in range(CLIENTS)]
threading.stack_size(256 * 1024)
for t in threads:
    t.start()
for t in threads:
    t.join(SECONDS + 60)
latencies.sort()
pick = lambda q: latencies[min(len(latencies) - 1, int(len(latencies) * q))] * 1000 if latencies else 0.0  # noqa: E731
print(
    f"logins {done[0]} failures {failures[0]} p50_ms {pick(0.5):.1f} p99_ms {pick(0.99):.1f}"
    + (f" first_error {first_error[0]}" if first_error else "")
)
