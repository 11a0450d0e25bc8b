#!/usr/bin/env python3
"""What a waiting checkout costs beyond an immediate one, from two callgrind files of
perf/percore.sh (CG_KEEP): one at 16 clients (most checkouts wait) and one at one client (none
does). Used for #39's pool changes, where the share of checkouts that wait moves from run to run
and the totals follow it: each function's inclusive cost per transaction is fitted as
immediate x (1 - share) + waiting x share, share = `Waiting::new` calls / transactions.

    perf/cg_waits.py SIXTEEN.out ONE.out TX      (TX: transactions each file counted)"""
import re
import subprocess
import sys

COST = re.compile(r"^\s*([\d,]+) \([\s\d.]+%\)\s+([<*])\s+(.*)$")
CALLS = re.compile(r"\(([\d,]+)x\)")
# (label, function, what is fitted: "incl" instructions or "calls")
ROWS = [
    ("Seat::checkout", r"placement::Seat::checkout::\{\{closure\}\}$", "incl"),
    ("checkout_where", r"CorePool::checkout_where::\{\{closure\}\}$", "incl"),
    ("checkin", r"CorePool::checkin$", "incl"),
    ("task polls", r"RawTask<F,T,S,M>::run$", "calls"),
    ("task wakes", r"RawTask<F,T,S,M>::wake$", "calls"),
    ("Waiters::wake", r"Waiters::wake$", "calls"),
    ("timers armed", r"Timers::insert$", "calls"),
    ("mallocs", r"^malloc$", "calls"),
]


def functions(path):
    """{function: (calls, inclusive instructions)} from `callgrind_annotate --tree=caller`: each
    function's line (`*`) follows its callers' (`<`), which carry the call counts."""
    out = subprocess.run(
        ["callgrind_annotate", "--tree=caller", "--inclusive=yes", "--auto=no", "--threshold=100", path],
        # From `/`: run inside a source tree, callgrind_annotate prints other lines (#39).
        check=True, capture_output=True, text=True, cwd="/",
    ).stdout
    found, calls = {}, 0
    for line in out.splitlines():
        m = COST.match(line)
        if not m:
            calls = 0
        elif m.group(2) == "<":
            c = CALLS.search(m.group(3))
            calls += int(c.group(1).replace(",", "")) if c else 0
        else:
            if m.group(3).endswith("]") and calls:
                name = re.sub(r"\s*\[[^\]]*\]$", "", m.group(3).split(":", 1)[-1])
                found.setdefault(name, (calls, int(m.group(1).replace(",", ""))))
            calls = 0
    return found


def pick(found, pattern):
    return next((v for k, v in found.items() if re.search(pattern, k)), (0, 0))


def main():
    many, one, tx = functions(sys.argv[1]), functions(sys.argv[2]), int(sys.argv[3])
    share = pick(many, r"waiters::Waiting::new$")[0] / tx
    print(f"checkouts that waited: {share:.3f} of {tx}")
    for label, pattern, what in ROWS:
        k = 1 if what == "incl" else 0
        a, b = pick(many, pattern)[k] / tx, pick(one, pattern)[k] / tx
        waiting = (a - b * (1 - share)) / share if share else 0.0
        print(f"{label:15s} {what:5s} 16 clients {a:9.3f}/tx  one {b:9.3f}/tx  a waiting checkout beyond an immediate one {waiting - b:9.3f}")


if __name__ == "__main__":
    main()
