#!/usr/bin/env python3
"""ci/check-host.py ENV: before `spack -e envs/ENV install`, this host runs code for the env's node
target (neoverse_v2 for the GH200 envs), or exit 2 with the env, its target and this host's. Plain
Spack does not check: it installs the first packages and fails later, at a fetch or a compile.
ci/site-install.sh calls it. Any python3 may start it: without commstack it runs itself again on the
repository's venv (made or refreshed by `bin/commstack venv`), once: a venv that cannot import it either is an
error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

AGAIN = "COMMSTACK_CHECK_HOST_AGAIN"  # set when it runs itself again on the venv: it does so once

try:
    from commstack.errors import CommstackError
    from commstack.spack import need_spack
except ModuleNotFoundError as e:  # the shebang's python3: the venv's, as bin/commstack makes it
    TOP = Path(__file__).resolve().parent.parent
    python = Path(os.environ.get("COMMSTACK_VENV") or TOP / ".venv") / "bin" / "python"
    if os.environ.get(AGAIN):
        print(f"ci/check-host.py: error: {python}, the venv's Python after `bin/commstack venv`, cannot import "
              f"commstack ({e}): remove {python.parent.parent} and run `bin/commstack venv` again", file=sys.stderr)
        sys.exit(2)
    if subprocess.run([str(TOP / "bin" / "commstack"), "venv"]).returncode != 0:
        print("ci/check-host.py: error: `bin/commstack venv` failed (above): no venv to run on", file=sys.stderr)
        sys.exit(2)
    os.execve(python, [str(python), __file__, *sys.argv[1:]], {**os.environ, AGAIN: "1"})
os.environ.pop(AGAIN, None)  # not for what it runs: Spack


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: ci/check-host.py ENV", file=sys.stderr)
        return 2
    from commstack.spack.envs import check_host
    try:
        host = check_host(need_spack(), sys.argv[1])
    except CommstackError as e:
        print(f"ci/check-host.py: error: {e}", file=sys.stderr)
        return 2
    print(f"ci/check-host.py: {sys.argv[1]}: this host ({host}) runs its node's target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
