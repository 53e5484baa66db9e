"""bin/commstack: the commands a newcomer and CI use.

  run          main job on this machine: local Slurm, mpi-pingpong, judged, report
  test [ARGS]  the test suite (pytest ARGS), JUnit XML under results/
  setup        the pinned Spack (toolchain.yaml) and this repo's package repository
  lock [ENV]   re-concretize the GH200 envs and write their spack.lock
  preflight E  before `spack install`: every external of env E exists here (prefix/module, version)
  containerize render containers/<image>/ (Containerfile, EDFs); --check diffs instead
  images       image references and the podman commands that build and push them
  mirror create ENV [DIR]  sources (and, with --key, a signed build cache) for an offline site
  suite NAME   run a suite (suites/) on --system, or print its srun lines with --dry-run
  report DIR   (re)write the report of a results directory; compare A B: B against baseline A
  slurm        start | stop | status of the local embedded Slurm
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from commstack.results import report
from commstack.run import steps as suites
from commstack.spack import containers
from commstack.results.judge import load_references
from commstack.run.launch import Launcher
from commstack.config import load_system
from commstack.spack import envs, mirror
from commstack.spack import preflight as spack_preflight
from commstack.spack import setup as spack_setup
from commstack.spack.envs import ENVS, LOCKED
from commstack.errors import CommstackError
from commstack.slurm import LocalSlurm
from commstack.paths import TOP
from commstack.spack import find_spack, need_spack, refuse_extra


def cmd_test(args: argparse.Namespace, extra: list[str]) -> int:
    results = TOP / "results"
    results.mkdir(exist_ok=True)
    spack = find_spack()
    print(f"commstack test: spack tier {'runs with ' + str(spack) if spack else 'SKIPPED: no Spack found'}",
          flush=True)
    argv = [sys.executable, "-m", "pytest", f"--junitxml={results / 'junit.xml'}", *extra]
    return subprocess.call(argv, cwd=TOP)


def cmd_slurm(args: argparse.Namespace, extra: list[str]) -> int:
    """--nodes 1 (start's default): the single-node cluster; N>1: the multi-node one (namespaces, root);
    stop and status without --nodes: both."""
    if args.nodes is not None and args.nodes < 1:
        raise CommstackError("--nodes must be 1 or more")
    n = args.nodes or (1 if args.action == "start" else None)
    clusters = []
    if n in (None, 1):
        clusters.append(LocalSlurm())
    if n != 1:
        clusters.append(LocalSlurm.multinode(n))  # None: as many nodes as its slurm.conf names
    for cluster in clusters:
        what = f"local Slurm ({cluster.nodes} node{'s' if cluster.nodes > 1 else ''})"
        if args.action == "start":
            cluster.start()
            print(f"{what} up: {', '.join(cluster.node_names)}; use it with: export SLURM_CONF={cluster.conf}")
        elif args.action == "stop":
            cluster.stop()
            print(f"{what} stopped")
        else:
            print(f"{what}:\n{cluster.status()}")
    return 0


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    """The main job on the embedded default: the smoke suite on the local Slurm, judged, reported."""
    print("commstack run: local Slurm, smoke suite under srun --mpi=pmix, judged and reported", flush=True)
    return cmd_test(args, ["-m", "slurm", "tests/slurm/test_suite.py", "--suite", "smoke", "--system", "local",
                           *extra])


def cmd_setup(args: argparse.Namespace, extra: list[str]) -> int:
    refuse_extra("setup", extra)
    return spack_setup.setup(args.spack_source, args.packages, args.force, args.detect, args.mirror)


def cmd_lock(args: argparse.Namespace, extra: list[str]) -> int:
    refuse_extra("lock", extra)
    return envs.lock(need_spack(), args.envs)


def cmd_preflight(args: argparse.Namespace, extra: list[str]) -> int:
    refuse_extra("preflight", extra)
    return spack_preflight.run(need_spack(), args.env)


def cmd_containerize(args: argparse.Namespace, extra: list[str]) -> int:
    refuse_extra("containerize", extra)
    return containers.containerize(need_spack(), args.images, args.check)


def cmd_images(args: argparse.Namespace, extra: list[str]) -> int:
    refuse_extra("images", extra)
    return containers.show_images()


def cmd_mirror(args: argparse.Namespace, extra: list[str]) -> int:
    refuse_extra("mirror", extra)
    mirror.create(need_spack(), args.env, Path(args.dir) if args.dir else None, args.key)
    return 0


def cmd_suite(args: argparse.Namespace, extra: list[str]) -> int:
    """--dry-run: the srun lines of a suite on a system; else run it in the slurm tier."""
    system = load_system(args.system)
    if args.dry_run:
        steps = suites.expand(suites.load_suite(args.name), system, memory_only=args.memory,
                              native_only=args.native_only)
        launcher = Launcher(system, "srun", {})
        for s in steps:
            print(shlex.join(launcher.command(s.step)) + (f"   # x{s.repeats}" if s.repeats > 1 else ""))
        print(f"# suite {args.name} on {system.name}: {len(steps)} steps")
        return 0
    memory = (["--memory", args.memory] if args.memory else []) + (["--native-only"] if args.native_only else [])
    return cmd_test(args, ["-m", "slurm", "tests/slurm/test_suite.py", "--suite", args.name,
                           "--system", args.system, *memory, *extra])


def cmd_report(args: argparse.Namespace, extra: list[str]) -> int:
    results = Path(args.results)
    records = report.load_records(results)
    system = load_system(records[0]["system"])
    path = report.write_report(results, load_references(system.references) if system.references else None)
    print(f"report: {path}")
    return 0


def cmd_compare(args: argparse.Namespace, extra: list[str]) -> int:
    changes = report.compare(Path(args.baseline), Path(args.results), args.tolerance)
    print(report.compare_table(changes), end="")
    return 1 if any(c.verdict == "regression" for c in changes) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="commstack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run", help="main job on this machine")
    sub.add_parser("test", help="run the tests (extra args go to pytest)")
    s = sub.add_parser("slurm", help="local embedded Slurm")
    s.add_argument("action", choices=("start", "stop", "status"))
    s.add_argument("--nodes", type=int, default=None,
                   help="1 (start's default): single node; N>1: N network-namespace nodes (root); "
                        "stop/status without it: both clusters")
    s = sub.add_parser("setup", help="pinned Spack and package repositories")
    s.add_argument("--spack-source", help="local path or git mirror of Spack (offline)")
    s.add_argument("--packages", help="local spack-packages checkout or mirror (offline)")
    s.add_argument("--force", action="store_true", help="accept a SPACK_ROOT of another major.minor")
    s.add_argument("--detect", action="store_true", help="detect this machine's externals again")
    s.add_argument("--mirror", help="a mirror made by `commstack mirror create`: every env uses it (offline)")
    s = sub.add_parser("lock", help="re-concretize envs and write their spack.lock")
    s.add_argument("envs", nargs="*", help=f"default: {' '.join(LOCKED)}")
    s = sub.add_parser("preflight", help="check that an env's externals exist on this machine")
    s.add_argument("env", help=f"one of: {', '.join(ENVS)}")
    s = sub.add_parser("containerize", help="render containers/<image>/ from envs/images and images.yaml")
    s.add_argument("images", nargs="*", help="default: all")
    s.add_argument("--check", action="store_true", help="regenerate and diff; write nothing")
    sub.add_parser("images", help="image references and their build/push commands")
    s = sub.add_parser("mirror", help="a mirror of an env's sources (and signed binaries) for offline sites")
    s.add_argument("action", choices=("create",))
    s.add_argument("env", help=f"one of: {', '.join(ENVS)}")
    s.add_argument("dir", nargs="?", help="default: results/mirror-<env>")
    s.add_argument("--key", help="GPG key (spack gpg list) to sign a build cache of what is installed")
    s = sub.add_parser("suite", help="run a benchmark suite, or print its srun lines (--dry-run)")
    s.add_argument("name", help="a suite under suites/")
    s.add_argument("--system", default="local")
    s.add_argument("--dry-run", action="store_true")
    s.add_argument("--memory", choices=("host", "device"), help="only the steps in this memory")
    s.add_argument("--native-only", action="store_true", help="drop the container runs")
    s = sub.add_parser("report", help="write results/<run>/report/ (Markdown, CSV, plots) again")
    s.add_argument("results", help="a results directory")
    s = sub.add_parser("compare", help="a result set against a baseline; exit 1 on a regression")
    s.add_argument("baseline")
    s.add_argument("results")
    s.add_argument("--tolerance", type=float, default=0.05, help="relative change always allowed (0.05)")
    args, extra = parser.parse_known_args(argv)
    handlers = {"run": cmd_run, "test": cmd_test, "slurm": cmd_slurm, "setup": cmd_setup, "lock": cmd_lock,
                "preflight": cmd_preflight, "containerize": cmd_containerize, "images": cmd_images, "mirror": cmd_mirror,
                "suite": cmd_suite, "report": cmd_report, "compare": cmd_compare}
    try:
        return handlers[args.cmd](args, extra)
    except CommstackError as e:
        print(f"commstack {args.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
