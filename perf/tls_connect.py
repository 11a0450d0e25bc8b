"""perf/tls.sh's client for handshake costs (#38): COUNT connections to a PostgreSQL listener,
one after the other, each sending a StartupMessage (user and database app) and reading the
first byte of the answer (the password request), then closing.

Usage: tls_connect.py PORT COUNT plain|full|resumed [1.2]
  plain    no TLS
  full     SSLRequest, then a TLS handshake without a session to resume (certificate unchecked)
  resumed  as full, each connection offering the session the previous one received
  1.2      TLS 1.2 at most (else the client's newest, TLS 1.3)
Prints how many connections the client's own ssl object reports resumed.
"""

import socket
import ssl
import struct
import sys

STARTUP = b"user\0app\0database\0app\0\0"


def main():
    port, count, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if sys.argv[4:] == ["1.2"]:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    session, reused = None, 0
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        # As libpq and PgJDBC do: without it, a TLS 1.2 resumption's StartupMessage waits for
        # the ACK of the client's Finished, which the router delays (~40 ms, nothing to send).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if mode != "plain":
            sock.sendall(struct.pack("!ii", 8, 80877103))
            if sock.recv(1) != b"S":
                sys.exit("SSLRequest refused")
            sock = context.wrap_socket(sock, session=session if mode == "resumed" else None)
        sock.sendall(struct.pack("!ii", 8 + len(STARTUP), 196608) + STARTUP)
        if sock.recv(1) != b"R":
            sys.exit("no password request")
        if mode != "plain":
            reused += sock.session_reused
            session = sock.session
        sock.close()
    print(reused)


if __name__ == "__main__":
    main()
