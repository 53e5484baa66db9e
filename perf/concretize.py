"""Concretization of every env: wall time per env, the serial sum, and the check as CI runs it.

  serial   each env alone, one after the other (Spack's repo indexes built beforehand, as by
           bin/commstack setup; the concretization cache fresh)
  ci-cold  the spack tier's way: all envs at once, one Spack process each, fresh concretization cache
  ci-warm  the same again with the cache the cold run left (CI keeps ~/.spack/cache): an
           unchanged env is answered from Spack's concretization cache
  --baseline adds `serial` with Spack's default solver settings instead of envs/common/concretizer.yaml

Target: ci-cold and ci-warm <= 0.5 x the serial sum on 2 cores.

  SPACK_ROOT=... bin/commstack venv && .venv/bin/python perf/concretize.py
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from commstack.spack.envs import ENVS, concretize_all, stage
from commstack.spack import Spack, find_spack

DEFAULTS = ("-c", "concretizer:duplicates:strategy:minimal", "-c", "concretizer:static_analysis:false",
            "-c", "concretizer:concretization_cache:enable:false")  # Spack's own defaults


def run(spack: Spack, work: Path, label: str, cache: Path, workers: int, options=()) -> tuple[float, dict]:
    staged = stage(work / label)
    options = (*options, "-c", f"concretizer:concretization_cache:url:{cache}")
    start = time.perf_counter()
    done = concretize_all(spack, list(ENVS), staged, workers=workers, options=options)
    wall = time.perf_counter() - start
    per_env = "  ".join(f"{n} {c.seconds:5.1f} s (solve {c.solve_seconds:4.1f})" for n, c in done.items())
    print(f"{label:16s} wall {wall:6.1f} s   {per_env}", flush=True)
    return wall, {n: c.seconds for n, c in done.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", action="store_true", help="also time Spack's default solver settings")
    args = ap.parse_args()
    exe = find_spack()
    if exe is None:
        print("no Spack found: set SPACK_ROOT or run bin/commstack setup", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="commstack-concretize-"))
    spack = Spack(exe, work / "logs")
    print(f"Spack {spack.version()}, {os.cpu_count()} cores, envs: {', '.join(ENVS)}")
    for name in ENVS:  # repo indexes (providers, tags) are built once per machine, not per check
        spack("providers", "mpi", env_dir=stage(work / "warmup") / ENVS[name])
    base = None
    if args.baseline:
        _, base = run(spack, work, "serial-defaults", work / "cache-defaults", 1, DEFAULTS)
        base = sum(base.values())
        print(f"{'':16s} serial sum {base:6.1f} s with Spack's default solver settings")
    _, serial = run(spack, work, "serial", work / "cache-serial", 1)
    total = sum(serial.values())
    print(f"{'':16s} serial sum {total:6.1f} s")
    cold, _ = run(spack, work, "ci-cold", work / "cache-ci", 0)
    warm, _ = run(spack, work, "ci-warm", work / "cache-ci", 0)
    print(f"ci-cold / serial sum = {cold / total:.2f}   ci-warm / serial sum = {warm / total:.2f}   (target <= 0.50)")
    if base:
        print(f"against the serial sum with Spack's defaults: ci-cold {cold / base:.2f}, ci-warm {warm / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
