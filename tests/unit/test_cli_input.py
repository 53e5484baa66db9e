"""The command line before anything runs: a results directory is never reused, and run ids are finer than
a second."""

import os
import re
import subprocess
import sys
from pathlib import Path

from commstack.paths import TOP
from commstack.run.runner import new_run_dir


def commstack(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "commstack", *args], capture_output=True, text=True, timeout=120)


def test_run_ids_are_finer_than_a_second(tmp_path):
    runs = [new_run_dir(tmp_path) for _ in range(3)]
    assert all(re.fullmatch(r"\d{8}-\d{6}-\d{6}-[0-9a-f]{6}", r.name) for r in runs), runs
    assert len({r.name[:22] for r in runs}) == 3  # the microseconds alone tell them apart, in order
    assert sorted(runs) == runs and (tmp_path / "latest").resolve() == runs[-1]


def test_a_results_directory_that_holds_files_is_refused(tmp_path):
    (tmp_path / "record.json").write_text("an earlier run\n")
    proc = commstack("run", "--results", str(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (f"commstack run: error: --results {tmp_path} exists and is not empty; give a new or empty directory"
            in proc.stderr)
    assert "[step" not in proc.stdout and os.listdir(tmp_path) == ["record.json"]
    plain = subprocess.run([sys.executable, "-m", "pytest", "suites/smoke.yaml", "--results", str(tmp_path),
                            "-p", "no:cacheprovider"], cwd=TOP, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 4 and f"--results {tmp_path} exists and is not empty" in plain.stderr


