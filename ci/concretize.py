#!/usr/bin/env python3
"""Concretize commstack envs, each in its own Spack process on a staged copy of the repository,
and compare the locked ones (gh200-ompi, gh200-cray) with their committed spack.lock.

  ci/concretize.py ENV...            CI's concretization matrix (ci/spack-tier.sh ENV): exit 1 when
                                     an env does not concretize or its lock drifted
  ci/concretize.py --report-only     the drift canary (ci/drift-canary.sh): every env, report only
  ci/concretize.py --nodes           no Spack: exit 1 when a committed lock has a node off its env's
                                     OS and target (a lock plain Spack wrote on another host, or a hand edit)

The same code as the spack tier and `bin/commstack lock` (commstack.spack.envs): one Spack process
per core, each concretizing its share of the envs; a failure names the env and the lines of its
files at fault, and a drift prints as `bin/commstack lock` prints it.
One env failing does not hide the others. Nothing in the repository is written; Spack's logs go
to results/spack-logs/. Run with the venv's Python (ci/spack-tier.sh does).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from commstack.errors import CommstackError
from commstack.paths import TOP
from commstack.spack import need_spack
from commstack.spack.envs import ENVS, LOCKED, check_nodes, concretize_all, env_dir, lock_diff, off_node, stage


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("envs", nargs="*", help=f"default: all ({' '.join(ENVS)})")
    ap.add_argument("--report-only", action="store_true", help="print failures and drift, exit 0")
    ap.add_argument("--nodes", action="store_true", help="only check that every committed lock is on its node")
    args = ap.parse_args()
    if args.nodes:
        try:
            names = [n for n in args.envs or LOCKED if env_dir(n) is not None]
        except CommstackError as e:
            print(f"ci/concretize.py: error: {e}", file=sys.stderr)
            return 2
        try:
            check_nodes(names)
        except CommstackError as e:
            print(f"ci/concretize.py: {e}", file=sys.stderr)
            return 1
        print(f"committed locks on their nodes' OS and target: {', '.join(names)}")
        return 0
    try:
        names = [n for n in args.envs or ENVS if env_dir(n) is not None]  # unknown names fail by name
        spack = need_spack()
    except CommstackError as e:
        print(f"ci/concretize.py: error: {e}", file=sys.stderr)
        return 2
    bad = []
    with tempfile.TemporaryDirectory(prefix="commstack-ci-") as tmp:
        done = concretize_all(spack, names, stage(Path(tmp)), raise_first=False)
        for name, c in done.items():
            if isinstance(c, CommstackError):
                bad.append(name)
                print(f"{name}: FAILED\n{c}", flush=True)
                continue
            line = f"{name}: {len(c.nodes)} nodes, solved in {c.solve_seconds:.1f} s"
            if name in LOCKED:
                committed = TOP / env_dir(name) / "spack.lock"
                off = off_node(name) if committed.exists() else []
                if off:
                    bad.append(name)
                    print("\n".join(off), flush=True)
                diff = lock_diff(committed, c.lock) if committed.exists() else [f"+ no committed lock: bin/commstack lock {name}"]
                if diff:
                    bad.append(name)
                line += (f"; {len(diff)} changes against the committed lock:\n  " + "\n  ".join(diff)
                         if diff else "; lock unchanged")
            print(line, flush=True)
    print(f"concretized {len(names)} envs: " + (f"{len(bad)} failed or drifted: {', '.join(bad)}" if bad else "all ok"))
    return 1 if bad and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())
