"""CI cannot pass a tier on skips: with COMMSTACK_REQUIRE_FAULTS=1 a fault test that skips fails, and with
COMMSTACK_REQUIRE_SPACK=1 a spack test skipped for want of Spack fails."""

import os
import subprocess
import sys
from pathlib import Path

from checkouts import without_osu

from commstack.paths import TOP

REQUIRE = ("COMMSTACK_REQUIRE_FAULTS", "COMMSTACK_REQUIRE_SPACK")


def pytest_of(test: str, require: str | None, *options: str, env: dict | None = None,
              cwd: Path = TOP) -> subprocess.CompletedProcess:
    env = {k: v for k, v in (env or os.environ).items() if k not in REQUIRE}
    if require:
        env[require] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", test, *options, "-p", "no:cacheprovider", "-rA"], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_a_skipped_fault_test_fails_where_the_tier_is_required():
    """A fault test that skips for real: --slurm off leaves it no local Slurm of its own."""
    test = "tests/faults/test_faults.py::test_missing_benchmark_binary"
    plain = pytest_of(test, None, "--slurm", "off")
    assert plain.returncode == 0 and "1 skipped" in plain.stdout, plain.stdout
    required = pytest_of(test, "COMMSTACK_REQUIRE_FAULTS", "--slurm", "off")
    assert required.returncode == 1, required.stdout
    assert ("COMMSTACK_REQUIRE_FAULTS=1: the faults tier may not skip here: --slurm=off: this test starts a local "
            "Slurm of its own") in required.stdout


def test_a_spack_test_skipped_for_want_of_spack_fails_where_the_tier_is_required(tmp_path):
    """In a copy of this checkout that finds no Spack (no SPACK_ROOT, no set-up of its own, none on PATH)."""
    env = without_osu(tmp_path, dict(os.environ))
    copy = Path(env["COMMSTACK_HOME"])
    test = "tests/spack/test_env_run.py::test_an_env_that_is_not_one_is_refused"
    plain = pytest_of(test, None, env=env, cwd=copy)
    assert plain.returncode == 0 and "1 skipped" in plain.stdout, plain.stdout
    assert "SKIPPED [1] tests/spack/test_env_run.py" in plain.stdout and "spack tier: no Spack found" in plain.stdout
    required = pytest_of(test, "COMMSTACK_REQUIRE_SPACK", env=env, cwd=copy)
    assert required.returncode == 1, required.stdout
    assert ("COMMSTACK_REQUIRE_SPACK=1: the spack tier may not skip for want of Spack here: spack tier: no Spack "
            "found: set SPACK_ROOT") in required.stdout
