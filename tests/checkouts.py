"""A checkout of this repository with no OSU in reach, for the tests whose exit status or report says what a run
does without one. Unsetting COMMSTACK_OSU_PREFIX is not that: `run` then looks OSU up in the local env with the
Spack `bin/commstack setup` recorded (.spack/spack-root, no SPACK_ROOT needed), and a checkout whose env has OSU
installed runs it (commstack.run.binaries, _local_env)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
#: what ties a checkout to a Spack and to its local env's installs (commstack.spack.find_spack, install.location)
SPACK_STATE = (".spack", ".spack-env")
#: the variables that would give a run OSU or a Spack: without_osu's env has none of them
UNSET = ("COMMSTACK_OSU_PREFIX", "SPACK_ROOT")


def without_osu(parent: Path, env: dict[str, str]) -> dict[str, str]:
    """`env` for bin/commstack working on a copy of this checkout made in `parent` (COMMSTACK_HOME; its entries
    linked, but SPACK_STATE, results and the venv) that finds no Spack: no SPACK_ROOT, no `spack` on PATH, no
    COMMSTACK_OSU_PREFIX. Its runs have no OSU, whatever this checkout's env holds."""
    tmp = Path(tempfile.mkdtemp(prefix="checkout-without-osu-", dir=parent))
    for entry in TOP.iterdir():
        if entry.name not in (*SPACK_STATE, "results", ".venv"):
            (tmp / entry.name).symlink_to(entry)
    kept = {k: v for k, v in env.items() if k not in UNSET}
    path = [d for d in env.get("PATH", os.defpath).split(os.pathsep) if not shutil.which("spack", path=d)]
    return {**kept, "COMMSTACK_HOME": str(tmp), "PATH": os.pathsep.join(path)}
