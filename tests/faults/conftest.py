"""What the fault tests share: a small tmpfs, and mpi-pingpong built once."""

import subprocess
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_fs(tmp_path):
    """A 1 MiB tmpfs (root: mount)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


@pytest.fixture(scope="session")
def pingpong(tmp_path_factory) -> Path:
    """mpi-pingpong built with the system MPI, outside any results directory."""
    out = tmp_path_factory.mktemp("pingpong") / "mpi-pingpong"
    proc = subprocess.run(["make", "-C", str(TOP / "src" / "mpi-pingpong"), "-B", f"OUT={out}"], capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        pytest.skip(f"cannot build mpi-pingpong here: {proc.stderr.strip()}")
    return out
