#!/usr/bin/env python3
"""#39's per-core line with the share of checkouts that wait held equal: from the callgrind files
perf/percore.sh keeps (CG_KEEP) of one core and two cores at 16 clients, and one file at one client
(where no checkout waits), the two-core total per transaction as it would be had the same share
of its checkouts waited as on one core. A second core holds half the pool, so more of its
checkouts wait; that share moves from run to run, and each waiting checkout costs a fixed amount
more than an immediate one (perf/cg_waits.py), so it is taken out here rather than averaged over.

    perf/cg_share.py ONE_CORE.out TWO_CORES.out ONE_CLIENT.out TX     (TX: transactions counted)

Per file: total instructions per transaction, share waiting, what a waiting checkout costs beyond
an immediate one (`Seat::checkout` and `checkin` inclusive, fitted as perf/cg_waits.py does); then
2c / 1c as counted, at the one-core share, and with no checkout waiting on either."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cg_waits import functions, pick  # noqa: E402

WAITING = r"waiters::Waiting::new$"
COSTS = [r"placement::Seat::checkout::\{\{closure\}\}$", r"CorePool::checkin$"]


def total(path):
    out = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", path],
                         check=True, capture_output=True, text=True, cwd="/").stdout
    m = re.search(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?PROGRAM TOTALS", out, re.M)
    return int(m.group(1).replace(",", ""))


def fit(path, one, tx):
    """(total/tx, share waiting, extra instructions per waiting checkout)."""
    found = functions(path)
    share = pick(found, WAITING)[0] / tx
    extra = 0.0
    for pattern in COSTS:
        a, b = pick(found, pattern)[1] / tx, pick(one, pattern)[1] / tx
        extra += (a - b * (1 - share)) / share - b if share else 0.0
    return total(path) / tx, share, extra


def main():
    tx = int(sys.argv[4])
    one = functions(sys.argv[3])
    (t1, s1, w1), (t2, s2, w2) = fit(sys.argv[1], one, tx), fit(sys.argv[2], one, tx)
    for name, t, s, w in (("1 core", t1, s1, w1), ("2 cores", t2, s2, w2)):
        print(f"{name:8s} {t:9.0f}/tx  share waiting {s:.3f}  a waiting checkout beyond an immediate one {w:7.0f}")
    print(f"2c / 1c as counted          {t2 / t1:.3f}")
    print(f"2c / 1c at the 1c share     {(t2 - (s2 - s1) * w2) / t1:.3f}")
    print(f"2c / 1c with none waiting   {(t2 - s2 * w2) / (t1 - s1 * w1):.3f}")


if __name__ == "__main__":
    main()
