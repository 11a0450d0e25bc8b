#!/usr/bin/env python3
"""Where two callgrind runs differ per transaction: inclusive instructions per transaction of
every function in either run (from `callgrind_annotate --inclusive=yes`), the largest
differences first. Used for #39 (what a second core adds per transaction, what a runtime change
saves) on the files perf/percore.sh keeps with CG_KEEP.

    perf/cg_diff.py A.out TX_A B.out TX_B [TOP]

TX_A, TX_B: the transactions each run counted (16 clients x CALLGRIND_TX for percore.sh)."""
import re
import subprocess
import sys

LINE = re.compile(r"^\s*([\d,]+)\s+\([\s\d.]+%\)\s+(.*?)\s*(\[[^\]]*\])?\s*$")


def per_tx(path, tx):
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
        check=True, capture_output=True, text=True,
    ).stdout
    costs = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        # file:function -> function; callgrind prints ??? for unknown files. A name ending in
        # "(N x)" is one of a function's entries in a cycle or by call count: left out, the
        # function's own line carries its whole inclusive cost.
        name = m.group(2).split(":", 1)[-1]
        if re.search(r"\([\d,]+x\)$", name):
            continue
        costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", "")) / tx
    return costs


def main():
    a_path, a_tx, b_path, b_tx = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    top = int(sys.argv[5]) if len(sys.argv) > 5 else 40
    a, b = per_tx(a_path, a_tx), per_tx(b_path, b_tx)
    rows = sorted(set(a) | set(b), key=lambda k: -abs(b.get(k, 0) - a.get(k, 0)))
    print(f"{'A/tx':>10} {'B/tx':>10} {'B-A':>9}  function")
    for name in rows[:top]:
        x, y = a.get(name, 0), b.get(name, 0)
        print(f"{x:10.0f} {y:10.0f} {y - x:+9.0f}  {name[:150]}")


if __name__ == "__main__":
    main()
