"""A step whose ranks print without end: the time to its verdict, commstack's peak memory, bytes printed.

A stand-in for mpi-pingpong (--pingpong) has each of its 2 ranks print --mb-per-rank MB of 100-character
lines and, at the end, one 8 MB line; it runs as a one-step suite through `bin/commstack suite` on a
local Slurm of its own (a private directory under a new temporary one; ports chosen by commstack).
Printed: the wall time from the command to its exit, the verdict and error kind, the peak resident
memory of commstack (the largest single process of its tree, from the kernel's own count, and the
largest sum over the tree, sampled every 50 ms: srun and pytest included, the Slurm daemons not), the
bytes commstack printed, and the bytes kept in stdout.txt. Issue 22 item 8 asks for a verdict within
2 minutes, under 1 GiB and under 1 MB printed at 200 MB per rank; exit 1 when a figure misses it.

  bin/commstack venv && .venv/bin/python perf/big_output.py [--mb-per-rank 200] [--commstack bin/commstack]
(as root, like every run on the embedded Slurm; --commstack another checkout's bin/commstack to compare).
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
SUITE = """name: big
description: one step whose ranks print without end
steps:
- {id: big, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 8], timeout_s: 600}
"""
BINARY = """#!/bin/bash
yes "$(printf '%099d' 0)" | head -c {size}
head -c 8000000 /dev/zero | tr '\\0' x
echo
"""


def tree_rss(root: int) -> int:
    """Resident bytes of `root` and its descendants now."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(stat[1]), []).append(int(name))
        rss[int(name)] = int(stat[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--mb-per-rank", type=int, default=200)
    p.add_argument("--commstack", default=str(TOP / "bin" / "commstack"), help="the bin/commstack to measure")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="commstack-big-output-"))
    try:
        binary, suite = work / "big-pingpong", work / "suites" / "big.yaml"
        binary.write_text(BINARY.replace("{size}", str(args.mb_per_rank * 10**6)))
        binary.chmod(0o755)
        suite.parent.mkdir()
        suite.write_text(SUITE)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "COMMSTACK_"))}
        env["COMMSTACK_SLURM_DIR"] = str(work / "slurm")
        results = work / "r"
        t0 = time.monotonic()
        proc = subprocess.Popen([args.commstack, "suite", str(suite), "--pingpong", str(binary), "--results",
                                 str(results)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        peak_sum, done = 0, threading.Event()

        def sample() -> None:
            nonlocal peak_sum
            while not done.is_set():
                peak_sum = max(peak_sum, tree_rss(proc.pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        printed = len(proc.communicate()[0])
        wall = time.monotonic() - t0
        done.set()
        sampler.join()
        peak_one = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        record = next(results.glob("steps/*/record.json"), None)
        verdict = json.loads(record.read_text()) if record else {}
        kept = sum(f.stat().st_size for f in results.glob("steps/*/repeat-0/stdout.txt"))
        print(f"output: 2 ranks x {args.mb_per_rank} MB + one 8 MB line each; {args.commstack} exit {proc.returncode}")
        print(f"verdict: {verdict.get('verdict', 'none')} [{verdict.get('error_kind') or '-'}] "
              f"{(verdict.get('reason') or '')[:160]}")
        print(f"time to verdict: {wall:.1f} s")
        print(f"peak RSS: {peak_one / 2**20:.0f} MiB (largest process), {peak_sum / 2**20:.0f} MiB (tree, sampled)")
        print(f"printed by commstack: {printed} bytes; kept in stdout.txt: {kept} bytes")
        ok = wall < 120 and max(peak_one, peak_sum) < 2**30 and printed < 10**6 and bool(verdict)
        print("issue 22 item 8: " + ("met" if ok else "NOT met") + " (< 120 s, < 1 GiB, < 1 MB printed)")
        return 0 if ok else 1
    finally:
        subprocess.run([args.commstack, "slurm", "stop", "--nodes", "1"], env={**os.environ,
                       "COMMSTACK_SLURM_DIR": str(work / "slurm")}, capture_output=True, timeout=120)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
