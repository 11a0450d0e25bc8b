#!/usr/bin/env python3
"""Parsers and the report writer for perf/run.sh.

  parse.py pgbench TARGET SCENARIO CLIENTS CPU0 CPU1 HOST0 HOST1 RSS WORKDIR < pgbench-output
  parse.py sysbench TARGET TEST CPU0 CPU1 HOST0 HOST1 RSS < sysbench-output
  parse.py report RAW.tsv COUNTS.tsv RESULTS.md ROUNDS DURATION

CPUn are the proxy's utime+stime and HOSTn the whole host's busy time, in clock ticks, before and
after the run. The first two print one tab-separated row; `report` writes the markdown tables
and the check of issue #39's targets into RESULTS.md between the run.sh markers."""
import collections, datetime, glob, os, platform, re, statistics, subprocess, sys

HZ = os.sysconf("SC_CLK_TCK")


def per_unit_us(t0, t1, units):
    """Clock ticks between t0 and t1 as microseconds per unit of work."""
    return (int(t1) - int(t0)) / HZ * 1e6 / units if units else float("nan")


def pgbench(target, scenario, clients, t0, t1, h0, h1, rss, work):
    out = sys.stdin.read()
    tps = float(re.search(r"tps = ([0-9.]+)", out).group(1))
    tx = int(re.search(r"actually processed: (\d+)", out).group(1))
    lat = sorted(int(l.split()[2]) for f in glob.glob(work + "/lat.*") for l in open(f) if len(l.split()) > 2)
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] / 1000 if lat else float("nan")
    cpu = per_unit_us(t0, t1, tx) if target != "direct" else float("nan")
    host = per_unit_us(h0, h1, tx)
    print(f"{target}\t{scenario}\t{clients}\t{tps:.0f}\t{pick(0.5):.3f}\t{pick(0.99):.3f}\t{cpu:.1f}\t{host:.1f}\t{rss}")


def sysbench(target, test, t0, t1, h0, h1, rss):
    out = sys.stdin.read()
    qps = float(re.search(r"queries:\s+\d+\s+\(([0-9.]+) per sec", out).group(1))
    q = int(re.search(r"queries:\s+(\d+)", out).group(1))
    p95 = float(re.search(r"95th percentile:\s+([0-9.]+)", out).group(1))
    avg = float(re.search(r"avg:\s+([0-9.]+)", out).group(1))
    cpu = per_unit_us(t0, t1, q) if target != "direct" else float("nan")
    host = per_unit_us(h0, h1, q)
    # Rows of sysbench count queries per second; its latency columns are the average and p95.
    print(f"{target}\tsysbench-{test}\t16\t{qps:.0f}\t{avg:.3f}\t{p95:.3f}\t{cpu:.1f}\t{host:.1f}\t{rss}")


def nan(x):
    return x != x


def spread(xs, spec):
    """Median with min–max, or a dash when nothing was measured."""
    xs = [x for x in xs if not nan(x)]
    if not xs:
        return "—"
    if len(xs) == 1:
        return f"{xs[0]:{spec}}"
    return f"{statistics.median(xs):{spec}} ({min(xs):{spec}}–{max(xs):{spec}})"


def version(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
        return (out.stdout or out.stderr).splitlines()[0].strip()
    except Exception:
        return "n/a"


class Table:
    """The runs of one perf/run.sh, by (workload, clients, target)."""

    def __init__(self, raw):
        self.rows = collections.defaultdict(list)
        for line in open(raw):
            t, sc, c, tps, p50, p99, cpu, host, rss = line.rstrip("\n").split("\t")
            self.rows[(sc, int(c), t)].append(
                dict(tps=float(tps), p50=float(p50), p99=float(p99), cpu=float(cpu), host=float(host), rss=int(rss)))

    def median(self, sc, c, t, field):
        xs = [r[field] for r in self.rows.get((sc, c, t), []) if not nan(r[field])]
        return statistics.median(xs) if xs else float("nan")

    def markdown(self):
        lines = ["| workload | clients | target | TPS (QPS for sysbench) | p50 ms (sysbench: avg) | p99 ms (sysbench: p95) "
                 "| proxy CPU µs/tx | host CPU µs/tx | proxy RSS KiB |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for (sc, c, t) in sorted(self.rows):
            v = self.rows[(sc, c, t)]
            col = lambda f, spec: spread([r[f] for r in v], spec)
            rss = "—" if t == "direct" else str(max(r["rss"] for r in v))
            lines.append(f"| {sc} | {c} | {t} | {col('tps', '.0f')} | {col('p50', '.3f')} | {col('p99', '.3f')} "
                         f"| {col('cpu', '.1f')} | {col('host', '.1f')} | {rss} |")
        return lines


def targets(tab, counts, idle):
    """Issue #39's "Done when" lines, each with the figures it was judged on."""
    m = tab.median
    out = []

    def check(ok, text):
        if ok is None:
            out.append(f"- not measured: {text}")
        else:
            out.append(f"- **{'met' if ok else 'NOT met'}**: {text}")

    def cmp(a, b, rel):
        return None if nan(a) or nan(b) else rel(a, b)

    for mode in ("simple", "extended"):
        sc = f"{mode}-select"
        qc, pc = m(sc, 16, "querypilot-1c", "cpu"), m(sc, 16, "pgbouncer", "cpu")
        check(cmp(qc, pc, lambda a, b: a <= 0.8 * b),
              f"{mode}, 16 clients, one core: router CPU {qc:.1f} µs/tx = {qc / pc:.2f}× PgBouncer's {pc:.1f} (≤ 0.80×)")
        qt, pt = m(sc, 16, "querypilot-1c", "tps"), m(sc, 16, "pgbouncer", "tps")
        check(cmp(qt, pt, lambda a, b: a >= b), f"{mode}, 16 clients, one core: {qt:.0f} TPS ≥ PgBouncer's {pt:.0f}")
    ps, ss = m("prepared-select", 16, "querypilot-1c", "cpu"), m("simple-select", 16, "querypilot-1c", "cpu")
    check(cmp(ps, ss, lambda a, b: a <= b), f"prepared costs no more than simple, one core: {ps:.1f} ≤ {ss:.1f} µs/tx")
    for mode in ("simple", "extended"):
        sc = f"{mode}-select"
        d = m(sc, 1, "direct", "p50")
        qa, pa = m(sc, 1, "querypilot-1c", "p50") - d, m(sc, 1, "pgbouncer", "p50") - d
        check(cmp(qa, pa, lambda a, b: a <= b),
              f"one client, {mode}: p50 latency added {qa * 1000:.0f} µs ≤ PgBouncer's {pa * 1000:.0f} µs")
        qc, pc = m(sc, 1, "querypilot-1c", "cpu"), m(sc, 1, "pgbouncer", "cpu")
        check(cmp(qc, pc, lambda a, b: a <= b), f"one client, {mode}: router CPU {qc:.1f} µs/tx ≤ PgBouncer's {pc:.1f}")
    cg = {(t, mode): int(v) for kind, t, mode, v in (c for c in counts if c[0] == "callgrind")}
    for mode in ("simple", "extended", "prepared"):
        one, two = cg.get(("querypilot-1c", mode)), cg.get(("querypilot-2c", mode))
        check(None if one is None or two is None else two <= 1.05 * one,
              f"{mode}, instructions per transaction on two cores vs one (callgrind): {two or 0:,} vs {one or 0:,} = "
              f"{(two or 0) / (one or 1):.3f}× (≤ 1.05×)")
    for mode in ("simple", "extended", "prepared"):
        sc = f"{mode}-select"
        two, one = m(sc, 16, "querypilot-2c", "cpu"), m(sc, 16, "querypilot-1c", "cpu")
        out.append(f"- for scale (wall clock, the load generator and the database share the two CPUs): {mode}, "
                   f"router CPU on two cores vs one: {two:.1f} vs {one:.1f} µs/tx = {two / one if one else float('nan'):.2f}×")
    if idle:
        n, ready, r0, r1 = idle
        per = (int(r1) - int(r0)) * 1024 / int(n)
        check(int(ready) == int(n) and per <= 2048, f"{ready} of {n} idle clients: {per:,.0f} bytes of RSS each (≤ 2,048)")
        a, b = m("simple-select", 16, "querypilot-1c-with-idle", "tps"), m("simple-select", 16, "querypilot-1c", "tps")
        check(cmp(a, b, lambda x, y: x >= 0.95 * y),
              f"pgbench -S, 16 clients, beside the idle clients: {a:.0f} TPS = {a / b:.2f}× its median without them ({b:.0f}) (≥ 0.95×)")
    q, h = m("sysbench-oltp_point_select", 16, "querypilot-1c", "cpu"), m("sysbench-oltp_point_select", 16, "haproxy", "cpu")
    check(cmp(q, h, lambda a, b: a <= b),
          f"MySQL, sysbench oltp_point_select, one core: router CPU {q:.1f} µs/query ≤ HAProxy's (TCP mode) {h:.1f}")
    for mode in ("simple", "extended"):
        q, p = cg.get(("querypilot-1c", mode)), cg.get(("pgbouncer", mode))
        if q is not None and p is not None:
            out.append(f"- for scale: user-space instructions, {mode}: {q:,}/tx against PgBouncer's {p:,} ({q / p:.2f}×)")
    st = {t: float(v) for kind, t, v, _ in (c for c in counts if c[0] == "strace")}
    q, p = st.get("querypilot-1c"), st.get("pgbouncer")
    if q is not None and p is not None:
        out.append(f"- for scale: system calls {q:.2f}/tx against PgBouncer's {p:.2f}")
    return out


def report(raw, counts_tsv, results, rounds, duration):
    tab = Table(raw)
    counts = [line.rstrip("\n").split("\t") for line in open(counts_tsv)]
    idle = next((c[1:] for c in counts if c[0] == "idle"), None)
    lines = ["<!-- run.sh:begin -->",
             f"## Latest `perf/run.sh` run ({datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, {rounds} round(s) of {duration} s)", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, kernel {platform.release()}; "
             f"{version(['pgbench', '--version'])}; {version(['pgbouncer', '--version'])}; "
             f"{version(['sysbench', '--version'])}; {version(['haproxy', '-v'])}.",
             "querypilot-1c runs on `cores = [0]`, querypilot-2c on `[0, 1]`; both and PgBouncer pool 8 server "
             "connections in transaction mode with md5 client logins. Medians over the rounds, min–max in "
             "parentheses. Proxy CPU = the proxy's utime+stime per transaction (per query for sysbench); host "
             "CPU = every CPU's busy time per transaction (load generator, database and proxy). PgBouncer 1.18 "
             "cannot serve prepared statements in transaction mode: no prepared rows for it.", ""]
    lines += tab.markdown()
    st = [c for c in counts if c[0] == "strace"]
    if st:
        lines += ["", "System calls per transaction (`strace -c -f`, pgbench -S simple, 16 clients, one core):", "",
                  "| proxy | calls/tx | by name |", "|---|---:|---|"]
        lines += [f"| {t} | {v} | {d} |" for _, t, v, d in st]
    cg = [c for c in counts if c[0] == "callgrind"]
    if cg:
        lines += ["", "User-space instructions per transaction (callgrind, pgbench -S, 16 clients, one core):", "",
                  "| proxy | mode | instructions/tx |", "|---|---|---:|"]
        lines += [f"| {t} | {mode} | {int(v):,} |" for _, t, mode, v in cg]
    lines += ["", "Issue #39's targets, judged on the medians above:", ""] + targets(tab, counts, idle)
    lines += ["<!-- run.sh:end -->"]
    block = "\n".join(lines)
    try:
        text = open(results).read()
    except FileNotFoundError:
        text = "# Performance results\n"
    if "<!-- run.sh:begin -->" in text:
        text = re.sub(r"<!-- run.sh:begin -->.*<!-- run.sh:end -->", lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    open(results, "w").write(text)
    print(block)


if __name__ == "__main__":
    {"pgbench": pgbench, "sysbench": sysbench, "report": report}[sys.argv[1]](*sys.argv[2:])
