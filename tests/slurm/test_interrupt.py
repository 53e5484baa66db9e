"""Ctrl-C on `commstack suite` as a user types it: the running step and the allocation are
cancelled, the interrupted step keeps its output, every step is recorded, the partial report is
written, and the command exits 130."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commstack.results.records import read_run
from commstack.run.runner import EXIT_INTERRUPTED

pytestmark = pytest.mark.slurm

LONG = """name: long
description: a ping-pong that runs for minutes, then one that never starts
steps:
- {id: long, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 8], args: [-n, 2000000000], timeout_s: 600}
- {id: after, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 64], args: [-n, 10]}
"""


def jobs(env: dict) -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, check=True,
                         timeout=30)
    return set(out.stdout.split())


def test_ctrl_c_cancels_the_step_and_allocation_and_keeps_everything(slurm_env, tmp_path: Path):
    suite = tmp_path / "suites" / "long.yaml"
    suite.parent.mkdir()
    suite.write_text(LONG)
    results = tmp_path / "r"
    before = jobs(slurm_env)
    cli = subprocess.Popen([sys.executable, "-m", "commstack", "suite", str(suite), "--results", str(results)],
                           env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    out = results / "steps" / "long--long-cpu-N1-n2-host-native" / "repeat-0"
    deadline = time.monotonic() + 120
    while not (out / "command.txt").exists() or not (jobs(slurm_env) - before):
        assert cli.poll() is None and time.monotonic() < deadline, "the step never started"
        time.sleep(0.5)
    time.sleep(2)  # the ping-pong is printing
    os.killpg(cli.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends to the foreground group
    text, _ = cli.communicate(timeout=120)
    assert cli.returncode == EXIT_INTERRUPTED, text
    records = {r.step: r for r in read_run(results)}
    assert records["long-cpu-N1-n2-host-native"].verdict == "not-run"
    assert records["long-cpu-N1-n2-host-native"].reason.startswith("interrupted (Ctrl-C)")
    assert records["after-cpu-N1-n2-host-native"].reason == "interrupted (Ctrl-C) before this step"
    assert "# mpi-pingpong v" in (out / "stdout.txt").read_text()  # its output so far is kept
    assert "2 steps: 2 not-run" in (results / "report" / "index.html").read_text()
    deadline = time.monotonic() + 30
    while jobs(slurm_env) - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not jobs(slurm_env) - before, "a job of the interrupted run is left"
