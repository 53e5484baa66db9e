"""Where OSU's binaries come from when a step runs them natively and no env's view gives them, in the order
docs/harness.md#suites-reports-and-compare gives. The resolver, commstack.run.binaries, keeps what is found and
installs the local env's: these functions only look."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from commstack.errors import BinaryNotFoundError
from commstack.paths import absolute

#: the tool's name (commstack.tools.osu.TOOL)
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


def native(binaries: Any) -> str | None:
    """libexec/osu-micro-benchmarks/mpi of the install the run names: typed (--osu-prefix), else
    $COMMSTACK_OSU_PREFIX's; None where it names none (the resolver, commstack.run.binaries, then asks `local`)."""
    prefix = binaries.osu_prefix or absolute(os.environ.get(PREFIX_VARIABLE, ""))
    return home(prefix) if prefix else None


def local(prefix: str | None, failed: str | None = None) -> str:
    """The same of the local Spack env's osu-micro-benchmarks, `prefix` (None: it has none, or `failed` says
    why it could not be built)."""
    if not prefix:
        raise BinaryNotFoundError(f"no OSU micro-benchmarks here: {f'{failed}; {OSU_FIX}' if failed else OSU_HINT}")
    return home(prefix)


def home(prefix: str) -> str:
    mpi = Path(prefix) / MPI_DIR
    if not (mpi / "pt2pt" / "osu_latency").is_file():
        raise BinaryNotFoundError(f"{prefix} is not an OSU install (no {mpi}/pt2pt/osu_latency): "
                                  f"{OSU_HINT}")
    return str(mpi)


def source(binaries: Any) -> str:
    """What named the install, for the record."""
    if binaries.osu_prefix:
        return "--osu-prefix"
    return f"${PREFIX_VARIABLE}" if os.environ.get(PREFIX_VARIABLE) else "the local env's osu-micro-benchmarks"
