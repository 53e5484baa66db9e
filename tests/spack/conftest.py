"""Spack tier fixtures: one Spack wrapper, and every env concretized once per session, in parallel."""

from pathlib import Path

import pytest

from commstack.spack.envs import ENVS, Concrete, concretize_all, stage
from commstack.spack import NO_SPACK, Spack, find_spack


@pytest.fixture(scope="session")
def spack(results_dir: Path) -> Spack:
    exe = find_spack()
    if exe is None:  # the collection hook skips these tests first; this guards direct use
        pytest.skip(f"spack tier: {NO_SPACK}")
    return Spack(exe, results_dir / "spack-logs")


@pytest.fixture(scope="session")
def staged(tmp_path_factory) -> Path:
    """A copy of the repo's Spack files: checks write locks and envs there, never in the repo."""
    return stage(tmp_path_factory.mktemp("staged"))


@pytest.fixture(scope="session")
def concrete(spack: Spack, staged: Path) -> dict[str, Concrete]:
    return concretize_all(spack, list(ENVS), staged)
