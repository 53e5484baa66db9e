#!/usr/bin/env python3
"""Concretize commstack envs, each in its own Spack process on a staged copy of the repository,
and compare the locked ones (gh200-ompi, gh200-cray) with their committed spack.lock.

  ci/concretize.py ENV...            CI's concretization matrix (ci/spack-tier.sh ENV): exit 1 when
                                     an env does not concretize or its lock drifted
  ci/concretize.py --report-only     the drift canary (ci/drift-canary.sh): every env, report only

The same code as the spack tier and `bin/commstack lock` (commstack.spack.envs), so a failure names the
env and the lines of its files at fault, and a drift prints as `bin/commstack lock` prints it.
One env failing does not hide the others. Nothing in the repository is written; Spack's logs go
to results/spack-logs/. Run with the venv's Python (ci/spack-tier.sh does).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from commstack.cli import need_spack
from commstack.spack.envs import DUMP, ENVS, LOCKED, concretize, env_dir, lock_diff, stage
from commstack.errors import CommstackError


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("envs", nargs="*", help=f"default: all ({' '.join(ENVS)})")
    ap.add_argument("--report-only", action="store_true", help="print failures and drift, exit 0")
    args = ap.parse_args()
    try:
        names = [n for n in args.envs or ENVS if env_dir(n) is not None]  # unknown names fail by name
        spack = need_spack()
    except CommstackError as e:
        print(f"ci/concretize.py: error: {e}", file=sys.stderr)
        return 2
    bad = []
    with tempfile.TemporaryDirectory(prefix="commstack-ci-") as tmp:
        staged = stage(Path(tmp))
        (staged / "dump.py").write_text(DUMP)
        with ThreadPoolExecutor(max_workers=len(names)) as pool:
            futures = {n: pool.submit(concretize, spack, n, staged) for n in names}
        for name, future in futures.items():
            try:
                c = future.result()
            except CommstackError as e:
                bad.append(name)
                print(f"{name}: FAILED\n{e}", flush=True)
                continue
            line = f"{name}: {len(c.nodes)} nodes in {c.seconds:.1f} s"
            if name in LOCKED:
                diff = lock_diff(TOP / env_dir(name) / "spack.lock", c.lock)
                if diff:
                    bad.append(name)
                line += (f"; {len(diff)} changes against the committed lock:\n  " + "\n  ".join(diff)
                         if diff else "; lock unchanged")
            print(line, flush=True)
    print(f"concretized {len(names)} envs: " + (f"{len(bad)} failed or drifted: {', '.join(bad)}" if bad else "all ok"))
    return 1 if bad and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())
