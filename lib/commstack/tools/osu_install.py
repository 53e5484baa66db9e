"""Where OSU's binaries come from when a step runs them natively and no env's view gives them (an env's view is
commstack.run.binaries's): the install prefix typed (--osu-prefix), else COMMSTACK_OSU_PREFIX's, else the local
Spack env's osu-micro-benchmarks, installed there by the pinned Spack where the run may build."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from commstack.errors import BinaryNotFoundError
from commstack.paths import absolute
from commstack.spack import find_spack
from commstack.spack.install import SpackInstallError, install, location

#: the tool's name (commstack.tools.osu.TOOL), under which a run notes why it has no OSU
NAME = "osu"
OSU_HINT = ("give an OSU install with --osu-prefix PREFIX (or COMMSTACK_OSU_PREFIX=PREFIX), or let `commstack run` "
            "build it with the pinned Spack (without --no-build)")
#: what fixes a failed build here: most often no network for the sources
OSU_FIX = ("to fix it offline: on a connected machine `bin/commstack mirror create local DIR`, bring DIR here and "
           "`bin/commstack setup --mirror DIR`, then run again; or give an install: --osu-prefix PREFIX "
           "(or COMMSTACK_OSU_PREFIX=PREFIX)")
#: the MPI benchmarks' directory in an install prefix
MPI_DIR = "libexec/osu-micro-benchmarks/mpi"
#: an OSU install for runs that name none: below --osu-prefix and an env's view, above the local env's
PREFIX_VARIABLE = "COMMSTACK_OSU_PREFIX"


def native(binaries: Any) -> str:
    """libexec/osu-micro-benchmarks/mpi of the install typed (--osu-prefix), else of $COMMSTACK_OSU_PREFIX's, else
    of the local env's (installed there by the pinned Spack where `binaries.build` allows); which of them goes
    to the record (binaries.sources)."""
    if binaries.osu_found is None:  # looked up, and built if need be, once per run ("": there is none)
        binaries.osu_found = _install(binaries)
    prefix, whence = binaries.osu_found
    if not prefix:
        raise BinaryNotFoundError(f"no OSU micro-benchmarks here: {binaries.missing.get(NAME, OSU_HINT)}")
    mpi = Path(prefix) / MPI_DIR
    if not (mpi / "pt2pt" / "osu_latency").is_file():
        raise BinaryNotFoundError(f"{prefix} is not an OSU install (no {mpi}/pt2pt/osu_latency): "
                                  f"{OSU_HINT}")
    binaries.sources.setdefault(NAME, {"from": whence})
    return str(mpi)


def _install(binaries: Any) -> tuple[str, str]:
    """The OSU install prefix where no env's view gives one, and what named it."""
    if binaries.osu_prefix:
        return binaries.osu_prefix, "--osu-prefix"
    if os.environ.get(PREFIX_VARIABLE):
        return absolute(os.environ[PREFIX_VARIABLE]), f"${PREFIX_VARIABLE}"
    return _from_spack(binaries), "the local env's osu-micro-benchmarks"


def _from_spack(binaries: Any) -> str:
    """The local env's OSU: installed already, else installed now by the pinned Spack."""
    exe = find_spack()
    found = location(exe, "osu-micro-benchmarks") if exe else None
    if found or not binaries.build:
        return found or ""
    try:
        return str(install("osu-micro-benchmarks", binaries.build_dir / "spack-install.log", binaries.say))
    except SpackInstallError as e:
        binaries.missing[NAME] = f"{str(e).rstrip('.')}; {OSU_FIX}"
        return ""
