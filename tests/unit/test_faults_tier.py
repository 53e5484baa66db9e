"""CI cannot pass the faults tier on skips: with COMMSTACK_REQUIRE_FAULTS=1 a fault test that skips fails."""

import os
import subprocess
import sys

from commstack.paths import TOP


def faults_test(require: bool) -> subprocess.CompletedProcess:
    """A fault test that skips for real: --slurm off leaves it no local Slurm of its own."""
    env = {k: v for k, v in os.environ.items() if k != "COMMSTACK_REQUIRE_FAULTS"}
    if require:
        env["COMMSTACK_REQUIRE_FAULTS"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "tests/faults/test_faults.py::test_missing_benchmark_binary",
                           "--slurm", "off", "-p", "no:cacheprovider", "-rA"], cwd=TOP, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_skipped_fault_test_fails_where_the_tier_is_required():
    plain = faults_test(require=False)
    assert plain.returncode == 0 and "1 skipped" in plain.stdout, plain.stdout
    required = faults_test(require=True)
    assert required.returncode == 1, required.stdout
    assert ("COMMSTACK_REQUIRE_FAULTS=1: the faults tier may not skip here: --slurm=off: this test starts a local "
            "Slurm of its own") in required.stdout
