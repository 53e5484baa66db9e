"""bin/commstack: the commands a newcomer and CI use.

  run          main job on this machine: local Slurm, mpi-pingpong, judged, report
  test [ARGS]  the test suite (pytest ARGS), JUnit XML under results/
  setup        the pinned Spack (toolchain.yaml) and this repo's package repository
  slurm        start | stop | status of the local embedded Slurm
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import yaml

from .errors import CommstackError
from .localslurm import LocalSlurm
from .spack import TOP, Spack, find_spack

TOOLCHAIN = TOP / "toolchain.yaml"


def pins() -> dict:
    return yaml.safe_load(TOOLCHAIN.read_text())


def cmd_test(args: argparse.Namespace, extra: list[str]) -> int:
    results = TOP / "results"
    results.mkdir(exist_ok=True)
    spack = find_spack()
    print(f"commstack test: spack tier {'runs with ' + str(spack) if spack else 'SKIPPED: no Spack found'}",
          flush=True)
    argv = [sys.executable, "-m", "pytest", f"--junitxml={results / 'junit.xml'}", *extra]
    return subprocess.call(argv, cwd=TOP)


def cmd_slurm(args: argparse.Namespace, extra: list[str]) -> int:
    cluster = LocalSlurm()
    if args.action == "start":
        cluster.start()
        print(f"local Slurm up; use it with: export SLURM_CONF={cluster.conf}")
    elif args.action == "stop":
        cluster.stop()
        print("local Slurm stopped")
    else:
        print(cluster.status())
    return 0


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    """The main job on the embedded default: everything the slurm tier does, then its report."""
    print("commstack run: local Slurm, mpi-pingpong under srun --mpi=pmix, judged and reported", flush=True)
    return cmd_test(args, ["-m", "slurm", "--system", "local", *extra])


def cmd_setup(args: argparse.Namespace, extra: list[str]) -> int:
    p = pins()
    want = p["spack"]["tag"].lstrip("v")
    dest = TOP / ".spack"
    dest.mkdir(exist_ok=True)
    spack_root = os.environ.get("SPACK_ROOT")
    if spack_root:
        exe = Path(spack_root) / "bin" / "spack"
        if not exe.is_file():
            raise CommstackError(f"SPACK_ROOT={spack_root} has no bin/spack")
        found = subprocess.run([str(exe), "--version"], capture_output=True, text=True).stdout.split()[0]
        print(f"setup: using Spack {found} at {spack_root} (pinned: {want})")
        if found.split(".")[:2] != want.split(".")[:2] and not args.force:
            raise CommstackError(f"SPACK_ROOT has Spack {found}, commstack is pinned to {want} "
                                 f"(major.minor differ); use --force to go on anyway")
    else:
        exe = dest / "spack" / "bin" / "spack"
        if not exe.is_file():
            _clone(p["spack"]["url"], p["spack"]["tag"], p["spack"]["commit"], dest / "spack", args.spack_source)
    # --packages: a checkout is used in place; anything else (a local git mirror) is cloned from
    given = Path(args.packages) if args.packages else None
    if given and (given / p["spack_packages"]["builtin"]).is_dir():
        packages = given
    else:
        packages = dest / "spack-packages"
        if not (packages / p["spack_packages"]["builtin"]).is_dir():
            _clone(p["spack_packages"]["url"], p["spack_packages"]["tag"], p["spack_packages"]["commit"], packages,
                   args.packages)
    builtin = (packages / p["spack_packages"]["builtin"]).resolve()
    # every env includes this file (optional), so builtin is our pinned checkout, never a download
    (dest / "repos.yaml").write_text(yaml.safe_dump({"repos": {"builtin": str(builtin)}}))
    spack = Spack(exe, TOP / "results" / "spack-logs")
    print(f"setup: Spack {spack.version()} ready: export SPACK_ROOT={exe.parent.parent}\n"
          f"setup: builtin={builtin} (written to {dest / 'repos.yaml'}); commstack repo={TOP / 'repo'}")
    return 0


def _clone(url: str, tag: str, commit: str, dest: Path, local: str | None) -> None:
    source = local or url
    print(f"setup: cloning {source} at {tag} into {dest}")
    proc = subprocess.run(["git", "clone", "-q", "--depth=1", "--branch", tag, source, str(dest)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise CommstackError(
            f"cannot clone {source} ({proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'no output'})."
            "\nOffline? Either point SPACK_ROOT at an existing Spack "
            f"{tag}, or give local copies: bin/commstack setup --spack-source /path/to/spack.git "
            "--packages /path/to/spack-packages (a checkout or local git mirror).")
    head = subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    if not head.startswith(commit):
        raise CommstackError(f"{dest}: tag {tag} is at {head.strip()}, toolchain.yaml pins {commit}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="commstack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run", help="main job on this machine")
    sub.add_parser("test", help="run the tests (extra args go to pytest)")
    s = sub.add_parser("slurm", help="local embedded Slurm")
    s.add_argument("action", choices=("start", "stop", "status"))
    s = sub.add_parser("setup", help="pinned Spack and package repositories")
    s.add_argument("--spack-source", help="local path or git mirror of Spack (offline)")
    s.add_argument("--packages", help="local spack-packages checkout or mirror (offline)")
    s.add_argument("--force", action="store_true", help="accept a SPACK_ROOT of another major.minor")
    args, extra = parser.parse_known_args(argv)
    handlers = {"run": cmd_run, "test": cmd_test, "slurm": cmd_slurm, "setup": cmd_setup}
    try:
        return handlers[args.cmd](args, extra)
    except CommstackError as e:
        print(f"commstack {args.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
