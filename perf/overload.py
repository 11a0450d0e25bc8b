#!/usr/bin/python3
"""Open-loop PostgreSQL load for #41's overload line (perf/overload.sh runs it).

  overload.py peak  HOST PORT USER PASSWORD DB --sql SQL --seconds S --workers K
      K clients run SQL back to back for S seconds: prints {"tps": ...}, the peak the pool
      serves (its connections all busy).
  overload.py offer HOST PORT USER PASSWORD DB --sql SQL --seconds S --rate R --timeout T
      Transactions arrive at R per second (Poisson, like users, whatever the answers do), each on
      an idle client connection (CONNS opened up front). A transaction succeeds when its answer
      comes within T seconds; an error answer is a rejection, counted by SQLSTATE with how long
      it took to come; past T the client gives up (a late timeout: it closes that connection, as
      an application's statement timeout would, and opens a fresh one). Prints one JSON object:
      goodput (successes per second), rejections by SQLSTATE with their median latency, late
      timeouts, arrivals dropped because every client connection was busy, and success latency.

Simple query protocol only (asyncpg's `execute` without arguments), so PgBouncer's transaction
pooling serves it unchanged.
"""
import argparse
import asyncio
import json
import random
import statistics
import sys
import time

import asyncpg


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("phase", choices=["peak", "offer"])
    for a in ("host", "port", "user", "password", "db"):
        p.add_argument(a)
    p.add_argument("--sql", default="SELECT pg_sleep(0.02)")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--rate", type=float, default=100)
    p.add_argument("--timeout", type=float, default=1.0)
    p.add_argument("--conns", type=int, default=0, help="client connections (default rate x timeout x 1.5)")
    return p.parse_args()


async def connect(a):
    return await asyncpg.connect(
        host=a.host, port=int(a.port), user=a.user, password=a.password, database=a.db,
        statement_cache_size=0, timeout=30,
    )


async def peak(a):
    conns = await asyncio.gather(*(connect(a) for _ in range(a.workers)))
    done = 0
    end = time.monotonic() + a.seconds

    async def worker(c):
        nonlocal done
        while time.monotonic() < end:
            await c.execute(a.sql)
            done += 1

    start = time.monotonic()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.monotonic() - start
    await asyncio.gather(*(c.close() for c in conns))
    print(json.dumps({"tps": round(done / elapsed, 1)}))


async def offer(a):
    n = a.conns or max(16, int(a.rate * a.timeout * 1.5))
    sem = asyncio.Semaphore(100)

    async def opened():
        async with sem:
            return await connect(a)

    idle = list(await asyncio.gather(*(opened() for _ in range(n))))
    ok, late, dropped = [], 0, 0
    rejected = {}
    tasks = set()

    def spawn(coro):
        t = asyncio.ensure_future(coro)
        tasks.add(t)
        t.add_done_callback(tasks.discard)

    async def replace():
        try:
            idle.append(await opened())
        except Exception as e:  # a refused login is a rejection too
            rejected.setdefault(f"login:{getattr(e, 'sqlstate', type(e).__name__)}", []).append(0.0)

    async def one(c):
        nonlocal late
        t0 = time.monotonic()
        try:
            await asyncio.wait_for(c.execute(a.sql), a.timeout)
        except asyncio.TimeoutError:
            late += 1
            c.terminate()
            spawn(replace())
            return
        except asyncpg.PostgresError as e:
            rejected.setdefault(e.sqlstate, []).append(time.monotonic() - t0)
            idle.append(c)
            return
        except (OSError, asyncpg.InterfaceError) as e:
            rejected.setdefault(type(e).__name__, []).append(time.monotonic() - t0)
            spawn(replace())
            return
        ok.append(time.monotonic() - t0)
        idle.append(c)

    start = time.monotonic()
    next_at = start
    while True:
        next_at += random.expovariate(a.rate)
        if next_at - start >= a.seconds:
            break
        delay = next_at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if not idle:
            dropped += 1
            continue
        spawn(one(idle.pop()))
    arrived_for = time.monotonic() - start
    while tasks:
        await asyncio.gather(*list(tasks), return_exceptions=True)
    for c in idle:
        c.terminate()
    ms = lambda v: round(v * 1000, 1)
    pct = lambda v, q: ms(sorted(v)[int(len(v) * q)]) if v else None
    print(json.dumps({
        "offered_tps": round(a.rate, 1),
        "goodput_tps": round(len(ok) / arrived_for, 1),
        "ok": len(ok),
        "ok_p50_ms": pct(ok, 0.5),
        "ok_p99_ms": pct(ok, 0.99),
        "rejected": {k: len(v) for k, v in sorted(rejected.items())},
        "rejected_p50_ms": {k: ms(statistics.median(v)) for k, v in sorted(rejected.items())},
        "late_timeouts": late,
        "client_busy_drops": dropped,
    }))


def main():
    a = parse()
    asyncio.run(peak(a) if a.phase == "peak" else offer(a))


if __name__ == "__main__":
    sys.exit(main())
