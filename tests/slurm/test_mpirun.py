"""`--launcher mpirun`: this host without Slurm, only when asked. A real Open MPI run."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from commstack.run.launch import Launcher, Step
from commstack.tools.mpi_pingpong import parse_pingpong
from commstack.config import load_system

TOP = Path(__file__).resolve().parents[2]
# the slurm tier's: real MPI launches (here by mpirun, which needs no Slurm), kept out of the unit tier
pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(not shutil.which("mpirun") or not shutil.which("mpicc"),
                                 reason="no mpirun/mpicc (ci/install-deps.sh installs Open MPI)")]


def test_pingpong_under_mpirun(tmp_path):
    exe = tmp_path / "mpi-pingpong"
    subprocess.run(["make", "-s", "-C", str(TOP / "src" / "mpi-pingpong"), "-B", f"OUT={exe}"], check=True)
    result = Launcher(load_system("local"), "mpirun").run(
        Step("pp", [str(exe), "-e", "64K", "-n", "10"], ntasks=2, timeout_s=120), tmp_path / "step")
    assert result.command[:3] == ["mpirun", "-np", "2"]
    sweep = parse_pingpong(result.stdout)
    assert sweep.complete and sweep.sizes[-1] == 65536 and all(r["check"] == "Pass" for r in sweep.rows)


def test_mpirun_is_never_chosen_silently(tmp_path):
    """With --slurm off and the default launcher, the slurm tier is skipped, not run by mpirun."""
    (tmp_path / "test_one.py").write_text("def test_one(launcher):\n    assert False, 'must not run'\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                          "-rs", "--rootdir", str(tmp_path), "--results", str(tmp_path / "r"), "--slurm", "off",
                          str(tmp_path / "test_one.py")], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and "slurm tier off (--slurm=off, --launcher=srun)" in out.stdout, out.stdout
