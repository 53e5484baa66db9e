"""Overhead of the harness's launch model on the local Slurm.

N mpi-pingpong steps (a) as job steps in one allocation, the harness's way, and (b) as one job
each (plain srun), the way a naive per-test runner does it. Prints wall time / sum of the steps'
own times for both. Target for (a): <= 1.05.

  bin/commstack venv && .venv/bin/python perf/step_overhead.py [-n 20]
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from commstack.run.launch import Allocation, Launcher, Step
from commstack.slurm.cluster import LocalSlurm
from commstack.config import load_system

TOP = Path(__file__).resolve().parents[1]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="commstack-overhead-") as work:  # nothing left in /tmp
        return measure_in(Path(work))


def measure_in(work: Path) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", "--steps", type=int, default=20)
    ap.add_argument("--max", default="1M", help="largest message of each ping-pong step")
    args = ap.parse_args()
    exe = work / "mpi-pingpong"
    subprocess.run(["make", "-s", "-C", str(TOP / "src" / "mpi-pingpong"), "-B", f"OUT={exe}"], check=True)
    cluster = LocalSlurm()
    cluster.start()
    system = load_system("local")
    prog = [str(exe), "-e", args.max, "-n", "50"]
    try:
        # (a) one allocation, every step in it; the steps' own time is what the launcher measured
        t0 = time.monotonic()
        with Allocation(system, cluster.variables, nodes=1, ntasks=2) as alloc:
            launcher = Launcher(system, "srun", cluster.variables, alloc)
            own = [launcher.run(Step(f"s{i}", prog, ntasks=2), work / "a" / str(i)).elapsed_s
                   for i in range(args.steps)]
        wall_a = time.monotonic() - t0
        # (b) one job per step
        t0 = time.monotonic()
        for i in range(args.steps):
            subprocess.run(["srun", "--mpi=pmix", "-n2", "--overcommit", *prog], env=cluster.variables, check=True,
                           capture_output=True)
        wall_b = time.monotonic() - t0
    finally:
        cluster.stop()  # our lease back; the last user stops it
    total = sum(own)
    print(f"steps: {args.steps} x mpi-pingpong 8 B..{args.max}, 2 ranks, local Slurm")
    print(f"sum of step times:             {total:8.2f} s  (mean {total / args.steps:.3f} s)")
    print(f"(a) one allocation, N steps:   {wall_a:8.2f} s  wall / sum = {wall_a / total:.3f}  (target <= 1.05)")
    print(f"(b) one job per step:          {wall_b:8.2f} s  wall / sum = {wall_b / total:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
