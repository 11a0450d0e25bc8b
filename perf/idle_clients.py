#!/usr/bin/env python3
"""Opens N idle PostgreSQL client connections through a router listener (MD5 auth) and holds
them until stdin closes or SIGTERM. Prints 'ready N' once every connection finished its login
(and its one QUERY, when given: a client that ran a statement before it went idle).

    perf/idle_clients.py HOST PORT USER PASSWORD DATABASE N [QUERY]

Used by perf/run.sh to measure router memory per idle client. Standard library only."""
import asyncio
import hashlib
import struct
import sys


def startup(user: str, database: str) -> bytes:
    body = struct.pack("!I", 196608)
    for k, v in (("user", user), ("database", database)):
        body += k.encode() + b"\0" + v.encode() + b"\0"
    body += b"\0"
    return struct.pack("!I", len(body) + 4) + body


async def read_msg(reader):
    head = await reader.readexactly(5)
    tag, length = head[:1], struct.unpack("!I", head[1:])[0]
    return tag, await reader.readexactly(length - 4)


async def until_ready(reader):
    while True:
        tag, body = await read_msg(reader)
        if tag == b"E":
            raise RuntimeError(body.decode(errors="replace"))
        if tag == b"Z":
            return


async def login(host, port, user, password, database, held, query):
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(startup(user, database))
    while True:
        tag, body = await read_msg(reader)
        if tag == b"R":
            code = struct.unpack("!I", body[:4])[0]
            if code == 5:
                inner = hashlib.md5((password + user).encode()).hexdigest()
                outer = "md5" + hashlib.md5(inner.encode() + body[4:8]).hexdigest()
                msg = outer.encode() + b"\0"
                writer.write(b"p" + struct.pack("!I", len(msg) + 4) + msg)
            elif code != 0:
                raise RuntimeError(f"unsupported auth request {code}")
        elif tag == b"E":
            raise RuntimeError(body.decode(errors="replace"))
        elif tag == b"Z":
            if query:
                sql = query.encode() + b"\0"
                writer.write(b"Q" + struct.pack("!I", len(sql) + 4) + sql)
                await until_ready(reader)
            held.append(writer)
            return


async def main():
    host, port, user, password, database, count = sys.argv[1:7]
    query = sys.argv[7] if len(sys.argv) > 7 else ""
    held = []
    sem = asyncio.Semaphore(200)

    async def one():
        async with sem:
            await login(host, int(port), user, password, database, held, query)

    await asyncio.gather(*(one() for _ in range(int(count))))
    print(f"ready {len(held)}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main())
