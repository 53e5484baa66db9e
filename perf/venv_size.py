"""The size of the venv each requirement set makes: what an image carries (requirements/spack.txt)
against a checkout's (requirements/dev.txt).

Each set is installed the way bin/commstack installs it (pip -r the set, then commstack editable,
without its dependencies) into a new venv under a private temporary directory, which is removed
after. The venv must then import clingo (Spack's concretizer) and run `commstack images` (one of the
Spack commands, which import what `bin/commstack setup` in an image does). Printed per set: the
packages pip installed and the venv's size on disk (`du -sk`). pip's cache (or PIP_FIND_LINKS/PIP_INDEX_URL) supplies the wheels.

  python3 perf/venv_size.py [SET ...]     (default: requirements/spack.txt requirements/harness.txt
                                           requirements/dev.txt)
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
SETS = ("requirements/spack.txt", "requirements/harness.txt", "requirements/dev.txt")


def measure(reqs: str, scratch: Path) -> tuple[int, int]:
    """(KiB on disk, packages installed) of a venv made from `reqs`."""
    venv = scratch / Path(reqs).stem
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(TOP / reqs)], check=True)
    subprocess.run([*pip, "--no-deps", "--no-build-isolation", "-e", str(TOP)], check=True)
    # what the image's venv is for: clingo for Spack, and a Spack command of commstack's running
    subprocess.run([py, "-c", "import clingo"], check=True)
    subprocess.run([str(venv / "bin" / "commstack"), "images"], check=True, stdout=subprocess.DEVNULL)
    listed = subprocess.run([py, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                            check=True, capture_output=True, text=True).stdout.split()
    kib = int(subprocess.run(["du", "-sk", str(venv)], check=True, capture_output=True, text=True).stdout.split()[0])
    return kib, len(listed)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sets", nargs="*", default=list(SETS), help="requirement files, relative to the checkout")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="commstack-venv-size.") as scratch:  # mode 0700
        for reqs in args.sets:
            kib, count = measure(reqs, Path(scratch))
            print(f"{reqs}: {kib / 1024:.0f} MiB in the venv, {count} packages; clingo and commstack images run",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
