"""Ctrl-C in the middle of a step cancels the step and the allocation the session made: no job is
left behind, and what the step wrote is kept. A real pytest session, interrupted for real."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

TOP = Path(__file__).resolve().parents[2]
LONG = '''
from commstack.run.launch import Step

def test_long(launcher, step_dir):
    launcher.run(Step("long", ["bash", "-c", "echo started; sleep 300"], ntasks=1, timeout_s=600), step_dir)
'''


def jobs(env: dict) -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i %j"], env=env, capture_output=True, text=True, check=True)
    return set(out.stdout.split("\n")) - {""}


def new_steps(env: dict, before: set[str]) -> list[str]:
    """Running job steps (not the `extern` one) of jobs that were not there before."""
    out = subprocess.run(["squeue", "-h", "-s", "-o", "%i %j"], env=env, capture_output=True, text=True).stdout
    old = {j.split()[0] for j in before}
    return [line for line in out.splitlines() if line.split(".")[0] not in old and "extern" not in line]


def test_ctrl_c_cancels_steps_and_allocation(slurm_env, tmp_path):
    (tmp_path / "test_long.py").write_text(LONG)
    before = jobs(slurm_env)
    env = dict(slurm_env)
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
         "--rootdir", str(tmp_path), "--results", str(tmp_path / "results"), str(tmp_path / "test_long.py")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    deadline = time.monotonic() + 120
    while not new_steps(slurm_env, before):
        assert session.poll() is None and time.monotonic() < deadline, "the step never started"
        time.sleep(0.5)
    os.killpg(session.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends to the foreground group
    out, _ = session.communicate(timeout=120)
    assert session.returncode == 2, out  # pytest: interrupted
    assert "KeyboardInterrupt" in out
    deadline = time.monotonic() + 30
    while jobs(slurm_env) != before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert jobs(slurm_env) == before, f"left behind: {jobs(slurm_env) - before}"
    kept = list((tmp_path / "results").glob("steps/*/stdout.txt"))
    assert kept and "started" in kept[0].read_text()
