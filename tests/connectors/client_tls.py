"""Client TLS through the router (#38), seen from the clients' side.

Usage: client_tls.py MODE PORT CA_FILE [ARGS...]; prints one line per check. Every line names
what the client's own TLS layer reports (protocol version, whether its socket is encrypted),
never what the router says about itself.

  psycopg   PORT CA          psycopg 3, sslmode=verify-full against CA, host "localhost"
  asyncpg   PORT CA          asyncpg with an ssl.SSLContext verifying against CA
  direct    PORT CA ALPN     PostgreSQL 17 direct TLS by hand: a ClientHello first (ALPN
                             ALPN, or none when "-"), then a StartupMessage over TLS; prints
                             the first message type the router answers with
  resume    PORT CA [CRT KEY]  two connections by hand (SSLRequest, TLS verifying CA, with
                             client certificate CRT when given, a StartupMessage, the first
                             answer byte), the second offering the session the first
                             received: prints whether each was resumed, as the client's ssl
                             object reports it, and the answers
  pymysql   PORT CA          PyMySQL with ssl verifying the certificate and the host name
  staged    PORT CA          psycopg connection that stays open: prints "ready", waits for a
                             line on stdin, then queries on the same connection
"""

import asyncio
import socket
import ssl
import struct
import sys


def psycopg_check(port, ca):
    import psycopg

    dsn = f"host=localhost port={port} dbname=app user=app password=app sslmode=verify-full sslrootcert={ca}"
    with psycopg.connect(dsn) as conn:
        value = conn.execute("SELECT 41 + 1").fetchone()[0]
        print(f"psycopg ssl_in_use={conn.pgconn.ssl_in_use} value={value}")


def asyncpg_check(port, ca):
    import asyncpg

    async def run():
        context = ssl.create_default_context(cafile=ca)
        conn = await asyncpg.connect(host="localhost", port=port, user="app", password="app", database="app", ssl=context)
        value = await conn.fetchval("SELECT 40 + 2")
        tls = conn._transport.get_extra_info("ssl_object")
        print(f"asyncpg version={tls.version() if tls else None} value={value}")
        await conn.close()

    asyncio.run(run())


def direct_check(port, ca, alpn):
    context = ssl.create_default_context(cafile=ca)
    if alpn != "-":
        context.set_alpn_protocols([alpn])
    raw = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        tls = context.wrap_socket(raw, server_hostname="localhost")
    except (ssl.SSLError, ConnectionError) as e:
        print(f"direct handshake-failed {type(e).__name__}")
        return
    params = b"user\0app\0database\0app\0\0"
    tls.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
    first = tls.recv(1)
    print(f"direct version={tls.version()} alpn={tls.selected_alpn_protocol()} answer={first.decode() if first else 'closed'}")
    tls.close()


def resume_check(port, ca, cert=None):
    context = ssl.create_default_context(cafile=ca)
    if cert:
        context.load_cert_chain(cert[0], cert[1])
    session, reused, answers = None, [], []
    for _ in range(2):
        raw = socket.create_connection(("127.0.0.1", port), timeout=20)
        raw.sendall(struct.pack("!ii", 8, 80877103))
        assert raw.recv(1) == b"S"
        tls = context.wrap_socket(raw, server_hostname="localhost", session=session)
        params = b"user\0app\0database\0app\0\0"
        tls.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
        # The answer comes after any session tickets, which reading it takes in.
        answers.append(tls.recv(1).decode())
        reused.append(tls.session_reused)
        session = tls.session
        tls.close()
    print(f"resume first={reused[0]} second={reused[1]} answers={''.join(answers)}")


def pymysql_check(port, ca):
    import pymysql

    conn = pymysql.connect(
        host="localhost", port=port, user="app", password="app", database="app",
        ssl_ca=ca, ssl_verify_cert=True, ssl_verify_identity=True,
    )
    with conn.cursor() as cur:
        cur.execute("SELECT 40 + 2")
        value = cur.fetchone()[0]
    print(f"pymysql version={conn._sock.version()} value={value}")
    conn.close()


def staged(port, ca):
    import psycopg

    dsn = f"host=localhost port={port} dbname=app user=app password=app sslmode=verify-full sslrootcert={ca}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT 1")
        print("ready", flush=True)
        sys.stdin.readline()
        value = conn.execute("SELECT 40 + 2").fetchone()[0]
        print(f"staged ssl_in_use={conn.pgconn.ssl_in_use} value={value}")


def main():
    mode, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "psycopg":
        psycopg_check(port, ca)
    elif mode == "asyncpg":
        asyncpg_check(port, ca)
    elif mode == "direct":
        direct_check(port, ca, sys.argv[4])
    elif mode == "resume":
        resume_check(port, ca, sys.argv[4:6] or None)
    elif mode == "pymysql":
        pymysql_check(port, ca)
    elif mode == "staged":
        staged(port, ca)
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
