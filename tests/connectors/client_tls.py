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
  moving    PORT CA KIND     a connection whose router is replaced while it is open (#40):
                             KIND psycopg (TLS 1.3), psycopg12 (TLS 1.2) or pymysql; sets a
                             session setting, prints "ready", waits for a line on stdin, then
                             on the same connection reads the setting back and sends and
                             receives values of many TLS records each
  split     PORT CA          psycopg through a relay in this script that passes the first 10
                             bytes of the client's next TLS record, prints "ready", and passes
                             the rest once a line comes on stdin; prints the query's answer
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


def ssl_protocol(conn):
    """The TLS version libpq's own TLS layer negotiated (PQsslAttribute; psycopg 3.1 lacks it)."""
    import ctypes
    import ctypes.util

    libpq = ctypes.CDLL(ctypes.util.find_library("pq"))
    libpq.PQsslAttribute.restype = ctypes.c_char_p
    libpq.PQsslAttribute.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    return libpq.PQsslAttribute(conn.pgconn.pgconn_ptr, b"protocol").decode()


def moving(port, ca, kind):
    big = "".join(chr(97 + i % 26) for i in range(300_000))
    if kind == "pymysql":
        import pymysql

        conn = pymysql.connect(
            host="localhost", port=port, user="app", password="app", database="app",
            ssl_ca=ca, ssl_verify_cert=True, ssl_verify_identity=True, autocommit=True,
        )
        cur = conn.cursor()
        cur.execute("SET SESSION sql_mode = 'ANSI_QUOTES'")
        version = conn._sock.version()
        setting, sent, length = "@@SESSION.sql_mode", "%s", "CHAR_LENGTH"
    else:
        import psycopg

        limit = " ssl_max_protocol_version=TLSv1.2" if kind == "psycopg12" else ""
        dsn = (f"host=localhost port={port} dbname=app user=app password=app sslmode=verify-full "
               f"sslrootcert={ca}{limit}")
        conn = psycopg.connect(dsn, autocommit=True)
        cur = conn.cursor()
        cur.execute("SET application_name = 'moving'")
        version = ssl_protocol(conn)
        setting, sent, length = "current_setting('application_name')", "%s::text", "length"
    cur.execute("SELECT 1")
    cur.fetchall()
    print("ready", flush=True)
    sys.stdin.readline()
    cur.execute(f"SELECT {setting}, {length}({sent}), {sent}", (big, big))
    got_setting, got_length, echoed = cur.fetchone()
    print(f"moving {kind} version={version} setting={got_setting} sent={got_length} echoed={echoed == big}")
    conn.close()


def split(port, ca):
    import socket
    import threading

    import psycopg

    listener = socket.create_server(("127.0.0.1", 0))
    hold = {"split": False, "rest": None, "router": None}
    held = threading.Event()

    def pump(src, dst, client_side):
        while True:
            data = src.recv(65536)
            if not data:
                dst.shutdown(socket.SHUT_WR)
                return
            if client_side and hold["split"]:
                hold["split"] = False
                dst.sendall(data[:10])
                hold["rest"] = data[10:]
                held.set()
                continue
            dst.sendall(data)

    def relay():
        client, _ = listener.accept()
        router = socket.create_connection(("127.0.0.1", port))
        hold["router"] = router
        threading.Thread(target=pump, args=(router, client, False), daemon=True).start()
        pump(client, router, True)

    threading.Thread(target=relay, daemon=True).start()
    relay_port = listener.getsockname()[1]
    dsn = (f"host=localhost port={relay_port} dbname=app user=app password=app sslmode=verify-full "
           f"sslrootcert={ca}")
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("SET application_name = 'split'")
    answer = {}
    hold["split"] = True
    query = threading.Thread(
        target=lambda: answer.setdefault("row", conn.execute(
            "SELECT 40 + 2, current_setting('application_name')").fetchone()))
    query.start()
    held.wait(20)
    print("ready", flush=True)
    sys.stdin.readline()
    # The client-side pump waits in recv until psycopg sends more, which it does only after
    # this answer: sending the rest from here keeps the bytes in order.
    hold["router"].sendall(hold["rest"])
    query.join(30)
    print(f"split answer={answer.get('row')}")
    conn.close()


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
    elif mode == "moving":
        moving(port, ca, sys.argv[4])
    elif mode == "split":
        split(port, ca)
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
