#!/usr/bin/env python3
"""Parsers and the report writer for perf/run.sh.

  parse.py pgbench TARGET SCENARIO CLIENTS CPU0 CPU1 RSS WORKDIR < pgbench-output
  parse.py sysbench TARGET TEST CPU0 CPU1 RSS < sysbench-output
  parse.py report RAW.tsv RESULTS.md MEMORY-LINE CORES ROUNDS DURATION

The first two print one tab-separated row; `report` writes the markdown table into RESULTS.md."""
import collections, datetime, glob, platform, re, statistics, subprocess, sys


def pgbench(target, scenario, clients, t0, t1, rss, work):
    out = sys.stdin.read()
    tps = float(re.search(r"tps = ([0-9.]+)", out).group(1))
    tx = int(re.search(r"actually processed: (\d+)", out).group(1))
    lat = sorted(int(l.split()[2]) for f in glob.glob(work + "/lat.*") for l in open(f) if len(l.split()) > 2)
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] / 1000 if lat else float("nan")
    cpu = (int(t1) - int(t0)) * 10000 / tx if target != "direct" else float("nan")
    print(f"{target}\t{scenario}\t{clients}\t{tps:.0f}\t{pick(0.5):.3f}\t{pick(0.99):.3f}\t{cpu:.1f}\t{rss}")


def sysbench(target, test, t0, t1, rss):
    out = sys.stdin.read()
    tps = float(re.search(r"transactions:\s+\d+\s+\(([0-9.]+) per sec", out).group(1))
    q = int(re.search(r"queries:\s+(\d+)", out).group(1))
    p95 = float(re.search(r"95th percentile:\s+([0-9.]+)", out).group(1))
    avg = float(re.search(r"avg:\s+([0-9.]+)", out).group(1))
    cpu = (int(t1) - int(t0)) * 10000 / q if target != "direct" else float("nan")
    print(f"{target}\tsysbench-{test}\t16\t{tps:.0f}\t{avg:.3f}\t{p95:.3f}\t{cpu:.1f}\t{rss}")


def report(raw, results, mem, cores, rounds, duration):
    rows = collections.defaultdict(list)
    for line in open(raw):
        t, sc, c, tps, p50, p99, cpu, rss = line.rstrip("\n").split("\t")
        rows[(sc, int(c), t)].append((float(tps), float(p50), float(p99), float(cpu), int(rss)))
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    def ver(cmd):
        try: return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0].strip()
        except Exception: return "n/a"
    lines = ["<!-- run.sh:begin -->",
             f"## Latest `perf/run.sh` run ({datetime.date.today()}, {rounds} round(s) of {duration} s)", "",
             f"Machine: {platform.machine()}, {cores} cores used by the router, kernel {platform.release()}; "
             f"{ver(['pgbench','--version'])}; {ver(['pgbouncer','--version'])}; {ver(['sysbench','--version'])}.",
             "Medians over rounds. CPU = proxy process utime+stime per transaction (per query for sysbench).", "",
             "| workload | clients | target | TPS | p50 ms | p99 ms | proxy CPU µs/tx | proxy RSS KiB |",
             "|---|---|---|---|---|---|---|---|"]
    for (sc, c, t) in sorted(rows, key=lambda k: (k[0], k[1], k[2])):
        v = rows[(sc, c, t)]
        tps, p50, p99, cpu = (med([x[i] for x in v]) for i in range(4))
        cpu_s = "—" if cpu != cpu else f"{cpu:.1f}"
        rss = "—" if t == "direct" else str(max(x[4] for x in v))
        lines.append(f"| {sc} | {c} | {t} | {tps:.0f} | {p50:.3f} | {p99:.3f} | {cpu_s} | {rss} |")
    lines += ["", f"Memory: {mem}.", "<!-- run.sh:end -->"]
    block = "\n".join(lines)
    try: text = open(results).read()
    except FileNotFoundError: text = "# Performance results\n"
    if "<!-- run.sh:begin -->" in text:
        text = re.sub(r"<!-- run.sh:begin -->.*<!-- run.sh:end -->", lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    open(results, "w").write(text)
    print(block)


if __name__ == "__main__":
    {"pgbench": pgbench, "sysbench": sysbench, "report": report}[sys.argv[1]](*sys.argv[2:])
