"""Concretization of every env: wall time per env, the serial sum, and the check as CI runs it.

  serial   each env alone in its own Spack process, one after the other (Spack's repo indexes
           built beforehand, as by bin/commstack setup; the concretization cache fresh)
  ci-cold  the spack tier's way: one Spack process per core, each taking the next env no other has
           taken until none is left (start-up, repositories and package classes shared between the
           envs of a process), fresh concretization cache
  ci-warm  the same again with the cache the cold run left (CI keeps ~/.spack/cache): an
           unchanged env is answered from Spack's concretization cache
  --baseline adds `serial` with Spack's default solver settings instead of envs/common/concretizer.yaml

Target: ci-cold and ci-warm <= 0.5 x the serial sum on 2 cores.
Spack's logs go to a temporary directory, removed at the end.

  SPACK_ROOT=... bin/commstack venv && .venv/bin/python perf/concretize.py
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from commstack.spack.envs import ENVS, concretize, concretize_all, stage
from commstack.spack import Spack, find_spack

DEFAULTS = ("-c", "concretizer:duplicates:strategy:minimal", "-c", "concretizer:static_analysis:false",
            "-c", "concretizer:concretization_cache:enable:false")  # Spack's own defaults


def serial(spack: Spack, work: Path, label: str, cache: Path, options=()) -> float:
    """Each env alone in a fresh Spack process, one after the other: the sum of their wall times."""
    staged = stage(work / label)
    options = (*options, "-c", f"concretizer:concretization_cache:url:{cache}")
    times = {n: concretize(spack, n, staged, options).seconds for n in ENVS}
    print(f"{label:16s} sum  {sum(times.values()):6.1f} s   "
          + "  ".join(f"{n} {t:5.1f}" for n, t in times.items()), flush=True)
    return sum(times.values())


def ci(spack: Spack, work: Path, label: str, cache: Path) -> float:
    """All envs as the spack tier concretizes them: one process per core."""
    staged = stage(work / label)
    start = time.perf_counter()
    done = concretize_all(spack, list(ENVS), staged, options=("-c", f"concretizer:concretization_cache:url:{cache}"))
    wall = time.perf_counter() - start
    print(f"{label:16s} wall {wall:6.1f} s   "
          + "  ".join(f"{n} solve {c.solve_seconds:4.1f}" for n, c in done.items()), flush=True)
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", action="store_true", help="also time Spack's default solver settings")
    args = ap.parse_args()
    exe = find_spack()
    if exe is None:
        print("no Spack found: set SPACK_ROOT or run bin/commstack setup", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="commstack-concretize-") as tmp:
        work = Path(tmp)
        spack = Spack(exe, work / "logs")
        print(f"Spack {spack.version()}, {os.cpu_count()} cores, envs: {', '.join(ENVS)}")
        for name in ENVS:  # repo indexes (providers, tags) are built once per machine, not per check
            spack("providers", "mpi", env_dir=stage(work / "warmup") / ENVS[name])
        base = serial(spack, work, "serial-defaults", work / "cache-defaults", DEFAULTS) if args.baseline else None
        total = serial(spack, work, "serial", work / "cache-serial")
        cold = ci(spack, work, "ci-cold", work / "cache-ci")
        warm = ci(spack, work, "ci-warm", work / "cache-ci")
    print(f"ci-cold / serial sum = {cold / total:.2f}   ci-warm / serial sum = {warm / total:.2f}   (target <= 0.50)")
    if base:
        print(f"against the serial sum with Spack's defaults: ci-cold {cold / base:.2f}, ci-warm {warm / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
