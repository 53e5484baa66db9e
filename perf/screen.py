"""Wall time of `commstack screen` on N local namespace nodes against the same checks one after another.

For each N (4, 8, 16 by default), on the multi-node local cluster of N nodes (root; run it inside
`flock /work/.mn.lock`), timed from the outside:
  - screen: `bin/commstack screen --system local-multinode --nodes N` (screens/local.yaml), steps at once;
  - serial: the same screen with `--max-steps 1`, every check one after another, the same steps;
  - suite: today's suite runner (`bin/commstack suite`) on a suite of the same checks, as many steps as the
    screen ran (per-node checks N times, pair checks once per pair of the rounds), one after another on the
    first nodes of its allocation (a suite step cannot name its nodes).
Then the per-step costs the planner (`commstack screen --plan`) reads: one srun step's fixed cost (the serial
screen's median osu_bw step, whose benchmark moves 6 MiB) and how many steps the controller starts per second
(64 `srun --exact true` steps at once on the N nodes). `--record` writes them to perf/screen-costs.yaml.

  COMMSTACK_OSU_PREFIX=/opt/omb72 flock /work/.mn.lock .venv/bin/python perf/screen.py [--nodes 4 8 16] [--record]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

from commstack.results.records import read_run
from commstack.screen import matching
from commstack.screen.spec import load_screen
from commstack.slurm.cluster import LocalSlurm

TOP = Path(__file__).resolve().parents[1]
BIN = str(TOP / "bin" / "commstack")
ENV = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "PYTHONDONTWRITEBYTECODE")}


def timed(argv: list[str]) -> tuple[float, int]:
    t0 = time.monotonic()
    rc = subprocess.run(argv, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return time.monotonic() - t0, rc


def suite_of(n: int, work: Path) -> Path:
    """The local screen's checks as a suite: as many steps as a screen of n nodes runs, one after another."""
    screen = load_screen("local")
    nodes = [f"node{i}" for i in range(1, n + 1)]
    pairs = sum(len(r) for r in matching.rounds_for(nodes, screen.pairs.rounds, screen.pairs.matching))
    steps = []
    for spec, times in [(s, n) for s in screen.per_node] + [(s, pairs) for s in screen.pairs.checks]:
        for i in range(times):
            steps.append({**spec.model_dump(exclude_defaults=True), "id": f"{spec.id or spec.benchmark}-{i}"})
    path = work / "screen-serial.yaml"
    path.write_text(yaml.safe_dump({"name": "screen-serial", "steps": steps}))
    return path


def step_rate(cluster: LocalSlurm, n: int, count: int = 64) -> float:
    """Steps the controller starts per second: `count` `srun --exact true` steps at once in one allocation."""
    env = {**ENV, **cluster.variables}
    out = subprocess.run(["salloc", "--no-shell", f"-N{n}", f"-n{n}", "--overcommit", "-t5"], env=env,
                         capture_output=True, text=True, timeout=120)
    job = out.stderr.split("Granted job allocation ")[1].split()[0]
    try:
        t0 = time.monotonic()
        procs = [subprocess.Popen(["srun", f"--jobid={job}", "-N1", "-n1", "--exact", "--overcommit",
                                   f"--nodelist=node{1 + i % n}", "true"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(count)]
        for p in procs:
            p.wait()
        return count / (time.monotonic() - t0)
    finally:
        subprocess.run(["scancel", job], env=env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--record", action="store_true", help="write the per-step costs to perf/screen-costs.yaml")
    args = ap.parse_args()
    rows, costs = [], {}
    for n in args.nodes:
        cluster = LocalSlurm.multinode(n)
        cluster.start()
        try:
            with tempfile.TemporaryDirectory(prefix="screen-perf-") as tmp:
                work = Path(tmp)
                screen_s, rc1 = timed([BIN, "screen", "--system", "local-multinode", "--nodes", str(n),
                                       "--results", str(work / "screen")])
                serial_s, rc2 = timed([BIN, "screen", "--system", "local-multinode", "--nodes", str(n),
                                       "--max-steps", "1", "--results", str(work / "serial")])
                suite_s, rc3 = timed([BIN, "suite", str(suite_of(n, work)), "--system", "local-multinode",
                                      "--results", str(work / "suite")])
                steps = json.loads((work / "screen" / "screen.json").read_text())["steps"]
                suite_steps = len(read_run(work / "suite"))
                bw = [r.elapsed_s for r in read_run(work / "serial") if r.tags.get("screen_check") == "osu_bw"
                      and r.verdict == "pass"]
                costs[n] = (statistics.median(bw) if bw else None, step_rate(cluster, n))
        finally:
            cluster.stop()
        rows.append((n, steps, screen_s, rc1, serial_s, rc2, suite_steps, suite_s, rc3))
        print(f"{n:>3} nodes: screen {screen_s:6.1f} s ({steps} steps, exit {rc1}); serial screen {serial_s:6.1f} s "
              f"(exit {rc2}); suite runner {suite_s:6.1f} s ({suite_steps} steps, exit {rc3}); "
              f"screen/serial {screen_s / serial_s:.2f}, screen/suite {screen_s / suite_s:.2f}; "
              f"osu_bw step {costs[n][0] or float('nan'):.2f} s, {costs[n][1]:.1f} steps/s started", flush=True)
    if args.record:
        n = max(costs)
        step_s, rate = costs[n]
        doc = {"measured": f"perf/screen.py on {n} local namespace nodes, {os.cpu_count()} cores, "
                           f"{datetime.now(timezone.utc):%Y-%m-%d}",
               "step_s": round(step_s, 2), "steps_per_s": round(rate, 1)}
        head = "# per-step costs `commstack screen --plan` reads; written by perf/screen.py --record\n"
        (TOP / "perf" / "screen-costs.yaml").write_text(head + yaml.safe_dump(doc))
        print(f"recorded {doc} in perf/screen-costs.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
