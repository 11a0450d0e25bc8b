#!/usr/bin/env python3
"""The router's per-transaction instructions net of the core's own wall-clock task, from the
callgrind files perf/percore.sh keeps with CG_KEEP (#39). The core's task (upkeep, pool
maintenance, timers) runs as often as the counted run lasts, not as often as transactions come,
so the printed total moves with the host's load (±400 a transaction seen); the loop's inclusive
count minus that task's does not.

    perf/cg_net.py TX FILE...     (TX: the transactions each file counted, e.g. 3200)

Prints one row per file: loop inclusive, core task inclusive, net."""
import sys

from cg_diff import per_tx

LOOP = "run_loop"
CORE_TASK = "querypilot::core::run::{{closure}}"


def net(path, tx):
    costs = per_tx(path, tx)
    loop = max((c for name, c in costs.items() if LOOP in name), default=0)
    task = costs.get(CORE_TASK, 0)
    return loop, task, loop - task


def main():
    tx = int(sys.argv[1])
    print(f"{'loop/tx':>10} {'core task':>10} {'net':>10}  file")
    for path in sys.argv[2:]:
        loop, task, rest = net(path, tx)
        print(f"{loop:10.0f} {task:10.0f} {rest:10.0f}  {path}")


if __name__ == "__main__":
    main()
