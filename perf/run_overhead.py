"""Cost of a run: `commstack suite` against ReFrame 4.10.4 running the same tests, side by side.

N identical `osu_latency -m 8:8` steps on 2 ranks, on the local Slurm, timed from the outside:
  - commstack: `bin/commstack suite <tmp>/suites/overhead.yaml --system local --osu-prefix P`
    (pytest in process, one allocation, one srun step per step, judged, report written);
  - ReFrame in one `salloc`: its local scheduler and srun launcher (perf/reframe/), with its default
    asynchronous execution policy and with --exec-policy=serial;
  - with --batch, ReFrame with one batch job per test.
The first commstack run is cold (it starts the local Slurm when none runs) and prints where its time
went. Then the variants run in turn, --repeats times; medians and ranges are printed, and
`commstack / reframe` against the fastest ReFrame inside an allocation. Exit 1 above --max-ratio.

ReFrame is installed by this script into .venv-perf (reframe-hpc from PyPI), not into .venv.

  bin/commstack venv && .venv/bin/python perf/run_overhead.py [-n 20] [--repeats 3] [--batch]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from commstack.results.records import read_run
from commstack.run.runner import PHASES
from commstack.slurm.cluster import LocalSlurm

TOP = Path(__file__).resolve().parents[1]
REFRAME = "4.10.4"
RFM_VENV = TOP / ".venv-perf"
#: both harnesses run in the caller's environment, less SLURM_CONF (commstack finds its local Slurm as a
#: user's shell would) and PYTHONDONTWRITEBYTECODE (without cached bytecode every start compiles again)
ENV = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "PYTHONDONTWRITEBYTECODE")}
CHECK, SETTINGS = TOP / "perf" / "reframe" / "osu_latency_check.py", TOP / "perf" / "reframe" / "settings.py"


def reframe() -> Path:
    """The reframe command of .venv-perf, installed there at the pinned version when it is not."""
    exe = RFM_VENV / "bin" / "reframe"
    have = subprocess.run([str(exe), "-V"], capture_output=True, text=True).stdout.strip() if exe.exists() else ""
    if have != REFRAME:
        print(f"installing reframe-hpc=={REFRAME} into {RFM_VENV}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(RFM_VENV)], check=True)
        subprocess.run([str(RFM_VENV / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                        f"reframe-hpc=={REFRAME}"], check=True)
    return exe


def write_suite(work: Path, n: int) -> Path:
    """N steps with distinct ids; pytest collects a suite file only in a directory named suites."""
    (work / "suites").mkdir()
    path = work / "suites" / "overhead.yaml"
    steps = "".join(f"- {{benchmark: osu_latency, id: lat{i:02d}, nodes: 1, ranks_per_node: 2, sizes: [8, 8]}}\n"
                    for i in range(n))
    path.write_text(f"name: overhead\ndescription: {n} identical osu_latency -m 8:8 steps on 2 ranks\n"
                    f"steps:\n{steps}")
    return path


def timed(argv: list[str], env: dict[str, str], log: Path) -> float:
    """Wall time of a command; its output goes to `log`, which a failure quotes."""
    t0 = time.monotonic()
    with log.open("w") as out:
        rc = subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - t0
    if rc != 0:
        sys.exit(f"{' '.join(argv)} failed (exit {rc}); its output:\n{log.read_text()[-3000:]}")
    return wall


def run_commstack(suite: Path, results: Path, osu: str, n: int) -> tuple[float, float, dict]:
    """(wall, sum of the steps' srun times, the run's own timings)."""
    wall = timed([str(TOP / "bin" / "commstack"), "suite", str(suite), "--system", "local", "--osu-prefix", osu,
                  "--results", str(results)], ENV, results.with_suffix(".log"))
    records = read_run(results)
    if len(records) != n or any(r.verdict != "pass" for r in records):
        sys.exit(f"commstack: expected {n} passed steps in {results}")
    own = sum(json.loads((results / o / "step.json").read_text())["elapsed_s"] for r in records for o in r.outputs)
    return wall, own, json.loads((results / "timings.json").read_text())


def run_reframe(exe: Path, prefix: Path, n: int, osu: str, slurm: LocalSlurm, how: str) -> float:
    env = {**ENV, "SLURM_CONF": str(slurm.conf), "OSU_PREFIX": osu, "RFM_OVERHEAD_TESTS": str(n)}
    rfm = [str(exe), "-C", str(SETTINGS), "-c", str(CHECK), "--prefix", str(prefix), "-r"]
    if how == "batch":
        argv = rfm + ["--system", "local:batch"]
    else:  # the local scheduler inside one allocation, as commstack's
        argv = ["salloc", "-N1", "-n2", "--overcommit", "-t30", *rfm, "--system", "local:salloc",
                f"--exec-policy={how}"]
    log = prefix.with_suffix(".log")
    wall = timed(argv, env, log)
    if not re.search(rf"PASSED .*Ran {n}/{n} test case", log.read_text()):
        sys.exit(f"reframe ({how}) did not pass {n} tests; see {log}")
    return wall


def spread(xs: list[float]) -> str:
    return f"median {statistics.median(xs):6.2f} s  ({min(xs):.2f}–{max(xs):.2f})"


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="commstack-run-overhead-") as work:  # nothing left in /tmp
        return measure_in(Path(work))


def measure_in(work: Path) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3, help="alternating repetitions of every variant")
    ap.add_argument("--osu-prefix", default="/opt/omb72", help="an OSU 7.x install (default: /opt/omb72)")
    ap.add_argument("--batch", action="store_true", help="also ReFrame with one batch job per test (slow)")
    ap.add_argument("--max-ratio", type=float, default=0.90)
    args = ap.parse_args()
    exe = reframe()
    suite = write_suite(work, args.steps)
    slurm = LocalSlurm()
    cold = not slurm.running()
    print(f"{args.steps} x osu_latency -m 8:8 on 2 ranks, local Slurm, {args.repeats} alternating repetitions; "
          f"work in {work}", flush=True)

    wall, own, timings = run_commstack(suite, work / "commstack-cold", args.osu_prefix, args.steps)
    why = "it started the local Slurm" if cold else "the local Slurm was already running"
    print(f"first commstack run ({why}): {wall:.2f} s wall: start-up {wall - timings['session']:.2f} s, "
          + ", ".join(f"{k} {timings[k]:.2f} s" for k in PHASES)
          + f", pytest and the rest {timings['session'] - sum(timings[k] for k in PHASES):.2f} s")

    started = not slurm.running()
    slurm.start()  # ReFrame needs it; commstack finds it running and leaves it
    variants = ["commstack", "async", "serial"] + (["batch"] if args.batch else [])
    walls: dict[str, list[float]] = {v: [] for v in variants}
    owns, phases = [], []
    try:
        for rep in range(args.repeats):
            for v in variants:
                if v == "commstack":
                    wall, own, timings = run_commstack(suite, work / f"commstack-{rep}", args.osu_prefix, args.steps)
                    owns.append(own)
                    phases.append(timings)
                else:
                    wall = run_reframe(exe, work / f"reframe-{v}-{rep}", args.steps, args.osu_prefix, slurm, v)
                walls[v].append(wall)
                print(f"  repetition {rep + 1}: {v:9s} {wall:6.2f} s", flush=True)
    finally:
        if started:
            slurm.stop()

    names = {"commstack": "commstack suite", "async": f"ReFrame {REFRAME} in one salloc (async, its default)",
             "serial": f"ReFrame {REFRAME} in one salloc (--exec-policy=serial)",
             "batch": f"ReFrame {REFRAME}, one batch job per test"}
    for v in variants:
        print(f"{names[v]:52s} {spread(walls[v])}")
    print(f"{'  commstack: sum of its steps (srun, as it timed them)':52s} {spread(owns)}")
    print("  commstack's own timings (median): "
          + ", ".join(f"{k} {statistics.median(t[k] for t in phases):.2f} s" for k in (*PHASES, "session"))
          + f"; start-up (wall - session) {statistics.median(w - t['session'] for w, t in zip(walls['commstack'], phases)):.2f} s")
    best = min(("async", "serial"), key=lambda v: statistics.median(walls[v]))
    ratio = statistics.median(walls["commstack"]) / statistics.median(walls[best])
    print(f"commstack / reframe = {ratio:.2f}  (against ReFrame in one salloc, {best}: the faster; "
          f"target <= {args.max_ratio:.2f})")
    return 0 if ratio <= args.max_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
