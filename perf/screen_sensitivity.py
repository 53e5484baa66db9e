"""The smallest fault `commstack screen` catches, measured on the local namespace cluster of 8 nodes (root).

Every link first gets a line rate (`--line-rate`, htb: a veth has none, and without one a healthy pair's figure is
the share of the two cores its step got, which a second job on the machine moves tenfold). Then, for each screen
file and each fault, `--runs` screens with the fault in place, through the command a user types
(`bin/commstack screen NAME --system local-multinode --nodes 8 --json`):

  egress   node5 slowed in what it sends (its eth0)          -> node5 named alone, "slow sending"
  ingress  node5 slowed in what it receives (its veth's end) -> node5 named alone, "slow receiving"
  both     node5 slowed both ways                            -> node5 named alone, "slow both ways"
  link     node2-node7 only (u32 filter on each eth0)        -> that pair bad or suspect, no bad node

each at every `--rates` rate, and `--healthy` screens with no fault (nothing named: exit 0, or 3 where a check
was blind). It prints a table of screen x fault x rate: runs named correctly, runs with a false alarm (another
node or pair named bad, or the wrong direction), median wall time, and the load average (1 min) around the
runs. `--keep DIR` keeps each screen's results directory there (screen.json, records, report).

  COMMSTACK_OSU_PREFIX=/opt/omb72 flock /run/commstack/namespace-cluster.tests.lock \
      .venv/bin/python perf/screen_sensitivity.py [--screens local fabric] [--rates 20mbit 200mbit]
      [--faults egress ingress both link] [--runs 3] [--healthy 6] [--line-rate 1gbit] [--keep DIR]

(the lock is the one the multinode tests take: the namespace cluster is one per machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from commstack.slurm import shaping
from commstack.slurm.cluster import LocalSlurm

TOP = Path(__file__).resolve().parents[1]
BIN = str(TOP / "bin" / "commstack")
ENV = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "PYTHONDONTWRITEBYTECODE")}
NODES = [f"node{i}" for i in range(1, 9)]
NODE, LINK = "node5", ("node2", "node7")
#: fault -> (how it is made, the node line a correct screen gives node5)
FAULTS = {"egress": ("out", "slow sending"), "ingress": ("in", "slow receiving"), "both": ("both", "slow both ways"),
          "link": (None, None)}


def apply(fault: str, rate: str) -> None:
    shaping.clear()
    shaping.line(NODES, LINE_RATE)
    if fault == "link":
        shaping.degrade_link(*LINK, "rate", rate)
    elif fault != "healthy":
        shaping.degrade_node(NODE, "rate", rate, FAULTS[fault][0])


def verdict(fault: str, doc: dict, rc: int) -> tuple[bool, bool]:
    """(named correctly, a false alarm) of one screen's screen.json."""
    bad_nodes = doc["bad_nodes"]
    bad_pairs = [tuple(p["nodes"]) for p in doc["bad_pairs"]]
    named_pairs = bad_pairs + [tuple(p["nodes"]) for p in doc["suspect_pairs"]]
    if fault == "healthy":
        alarm = rc == 1 or bool(bad_nodes or bad_pairs)
        return not alarm, alarm
    if fault == "link":
        right = LINK in named_pairs and not bad_nodes
        alarm = bool(bad_nodes) or any(p != LINK for p in bad_pairs)
        return right, alarm
    reason = doc["nodes"][NODE]["reason"]
    right = rc == 1 and bad_nodes == [NODE] and reason.startswith(FAULTS[fault][1] + ":") and not bad_pairs
    alarm = any(n != NODE for n in bad_nodes) or bool(bad_pairs) or \
        (NODE in bad_nodes and not reason.startswith(FAULTS[fault][1] + ":"))
    return right, alarm


def screen(name: str, results: Path) -> tuple[dict, int, float, str]:
    t0 = time.monotonic()
    out = subprocess.run([BIN, "screen", name, "--system", "local-multinode", "--nodes", "8", "--json",
                          "--results", str(results)], env=ENV, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t0
    if out.returncode not in (0, 1, 3):   # 3: nothing bad, a check blind (said in the table's runs)
        raise SystemExit(f"screen {name} exited {out.returncode}: {out.stderr.strip()[-2000:]}")
    doc = json.loads(out.stdout)
    return doc, out.returncode, wall, f"bad nodes {doc['bad_nodes']} ({doc['nodes'][NODE]['reason'] or 'ok'}), " \
                                      f"bad pairs {[p['nodes'] for p in doc['bad_pairs']]}"


def main() -> int:
    global LINE_RATE
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--screens", nargs="+", default=["local", "fabric"])
    ap.add_argument("--rates", nargs="+", default=["20mbit", "200mbit"])
    ap.add_argument("--faults", nargs="+", default=list(FAULTS), choices=list(FAULTS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--healthy", type=int, default=6)
    ap.add_argument("--line-rate", default="1gbit")
    ap.add_argument("--keep", type=Path, help="keep every screen's results directory under this one")
    args = ap.parse_args()
    LINE_RATE = args.line_rate
    if os.geteuid() != 0:
        return "perf/screen_sensitivity.py: network namespaces and tc need root"
    keep = args.keep or Path(tempfile.mkdtemp(prefix="screen-sensitivity-"))
    cluster = LocalSlurm.multinode(8, leaf_switches=2)
    cluster.start()
    rows = []
    try:
        for name in args.screens:
            cases = [("healthy", "-", args.healthy)] * bool(args.healthy) + \
                [(f, r, args.runs) for f in args.faults for r in args.rates]
            for fault, rate, runs in cases:
                apply(fault, rate)
                right = alarms = 0
                walls, loads = [], [os.getloadavg()[0]]
                for k in range(runs):
                    doc, rc, wall, said = screen(name, keep / f"{name}-{fault}-{rate}-{k + 1}")
                    ok, alarm = verdict(fault, doc, rc)
                    right, alarms = right + ok, alarms + alarm
                    walls.append(wall)
                    loads.append(os.getloadavg()[0])
                    print(f"  {name} {fault} {rate} run {k + 1}: exit {rc}, {said}, {wall:.0f} s, "
                          f"load {loads[-1]:.1f}", flush=True)
                rows.append((name, fault, rate, runs, right, alarms, statistics.median(walls), min(loads), max(loads)))
    finally:
        shaping.clear()
        cluster.stop()
    print(f"\nline rate {LINE_RATE} on every link; node faults on {NODE}, the link fault on {'-'.join(LINK)}; "
          f"{os.cpu_count()} cores; results in {keep}")
    head = ("screen", "fault", "rate", "runs", "named correctly", "false alarms", "median s", "load 1 min")
    table = [head] + [(n, f, r, str(k), str(c), str(a), f"{w:.0f}", f"{lo:.1f}-{hi:.1f}")
                      for n, f, r, k, c, a, w, lo, hi in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    print("| " + " | ".join(c.ljust(w) for c, w in zip(head, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in table[1:]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
