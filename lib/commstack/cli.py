"""bin/commstack: the commands a newcomer and CI use.

  run          main job on this machine: local Slurm, mpi-pingpong, judged, report
  test [ARGS]  the test suite (pytest ARGS), JUnit XML under results/
  setup        the pinned Spack (toolchain.yaml) and this repo's package repository
  lock [ENV]   re-concretize the GH200 envs and write their spack.lock
  preflight E  before `spack install`: every external of env E exists here (prefix/module, version)
  containerize render containers/<image>/ (Containerfile, EDFs); --check diffs instead
  images       image references and the podman commands that build and push them
  suite NAME   run a suite (suites/) on --system, or print its srun lines with --dry-run
  report DIR   (re)write the report of a results directory; compare A B: B against baseline A
  slurm        start | stop | status of the local embedded Slurm
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from commstack.results import report
from commstack.run import steps as suites
from commstack.spack import containers
from commstack.results.judge import load_references
from commstack.run.launch import Launcher
from commstack.config import load_system
from commstack.spack.envs import ENVS, LOCKED, concretize_all, env_dir, lock_diff, preflight, stage
from commstack.errors import CommstackError
from commstack.slurm import LocalSlurm
from commstack.paths import TOP
from commstack.spack import Spack, find_spack

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
            cluster.start(manual=True)  # held until `slurm stop`, not by this short-lived process
            print(f"{what} up: {', '.join(cluster.node_names)}; use it with: export SLURM_CONF={cluster.conf}")
        elif args.action == "stop":
            if cluster.stop(manual=True):
                print(f"{what} stopped")
            else:
                print(f"{what} still used by {', '.join(cluster.leases())} (pid-start time); "
                      "it stops when the last of them ends")
        else:
            print(f"{what}:\n{cluster.status()}")
    return 0


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    """The main job on the embedded default: the smoke suite on the local Slurm, judged, reported."""
    print("commstack run: local Slurm, smoke suite under srun --mpi=pmix, judged and reported", flush=True)
    return cmd_test(args, ["-m", "slurm", "tests/slurm/test_suite.py", "--suite", "smoke", "--system", "local",
                           *extra])


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
    # every env includes this file (optional), so builtin is our pinned checkout, never a download;
    # commstack is in it too for commands outside an env (`spack -C .spack ...`)
    repos = {"commstack": str(TOP / "repo" / "spack_repo" / "commstack"), "builtin": str(builtin)}
    (dest / "repos.yaml").write_text(yaml.safe_dump({"repos": repos}, sort_keys=False))
    spack = Spack(exe, TOP / "results" / "spack-logs")
    print(f"setup: Spack {spack.version()} ready: export SPACK_ROOT={exe.parent.parent}\n"
          f"setup: repos in {dest / 'repos.yaml'}: commstack={repos['commstack']}, builtin={builtin}")
    externals = dest / "externals.yaml"
    if args.detect or not externals.exists():
        detect_externals(spack, externals)
    return 0


#: what the local env takes from the machine: compilers and MPI, then the usual build tools
#: (`spack external find` searches either named packages or tags, not both at once)
DETECT = (("gcc", "llvm", "openmpi", "mpich"), ("--tag", "build-tools", "--tag", "core-packages"))


def detect_externals(spack: Spack, out: Path) -> None:
    """`spack external find` into a scratch user scope, kept as the local env's externals.yaml."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {"SPACK_USER_CONFIG_PATH": scratch}
        for what in DETECT:
            spack("-C", str(out.parent), "external", "find", "--scope", "user", *what, extra_env=env)
        found = Path(scratch) / "packages.yaml"
        if not found.exists():
            raise CommstackError("spack external find detected nothing (no compiler, no MPI?)")
        text = found.read_text()
    out.write_text("# written by `bin/commstack setup` (spack external find); --detect redoes it\n" + text)
    names = sorted((yaml.safe_load(text).get("packages") or {}))
    print(f"setup: {len(names)} externals of this machine in {out}: {', '.join(names)}")


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


def need_spack() -> Spack:
    exe = find_spack()
    if exe is None:
        raise CommstackError("no Spack found: set SPACK_ROOT or run bin/commstack setup")
    return Spack(exe, TOP / "results" / "spack-logs")


def cmd_lock(args: argparse.Namespace, extra: list[str]) -> int:
    """Concretize the locked envs (on a staged copy) and write their spack.lock, showing the diff."""
    names = args.envs or list(LOCKED)
    for name in names:
        if name not in LOCKED:
            env_dir(name)  # unknown names fail here, by name
            raise CommstackError(f"env {name} has no committed lock (its externals are this machine's)")
    with tempfile.TemporaryDirectory() as tmp:
        done = concretize_all(need_spack(), names, stage(Path(tmp)))
        for name, c in done.items():
            lock = TOP / env_dir(name) / "spack.lock"
            diff = lock_diff(lock, c.lock) if lock.exists() else ["+ new lock"]
            shutil.copy(c.lock, lock)
            print(f"lock {name}: {len(c.nodes)} nodes in {c.seconds:.1f} s; "
                  + (f"{len(diff)} changes:\n  " + "\n  ".join(diff) if diff else "unchanged"))
    return 0


def cmd_preflight(args: argparse.Namespace, extra: list[str]) -> int:
    """Before `spack install` on a real system: does every external of the env exist here?"""
    checks = preflight(need_spack(), TOP / env_dir(args.env))
    for c in checks:
        print(f"  {c.line()}")
    missing = [c for c in checks if c.problems]
    print(f"preflight {args.env}: {len(checks)} externals, "
          + (f"{len(missing)} missing: {', '.join(c.name for c in missing)}" if missing else "all present"))
    return 1 if missing else 0


def cmd_containerize(args: argparse.Namespace, extra: list[str]) -> int:
    """Render containers/<image>/ (Containerfile by spack containerize, EDFs); --check: diff only."""
    spack = need_spack()
    chosen = [containers.image(n) for n in args.images] or list(containers.images().values())
    diffs = []
    for img in chosen:
        files = containers.rendered(spack, img)  # raises before anything is written
        found = containers.drift(files)
        diffs += found
        if not args.check:
            containers.write(files)
        print(f"{img.name}: {len(files)} files, " + (f"{len(found)} changed" if found else "unchanged"))
    if args.check and diffs:
        print("\n".join(diffs))
        print("containers drifted from their envs: run bin/commstack containerize", file=sys.stderr)
        return 1
    return 0


def cmd_images(args: argparse.Namespace, extra: list[str]) -> int:
    """Each image's reference, files, and the commands that build and push it (no engine needed)."""
    for img in containers.images().values():
        rel = img.containerfile.relative_to(TOP)
        print(f"{img.name}: {img.ref}\n"
              f"  podman build --platform linux/arm64 -f {rel} -t {img.ref} .\n"
              f"  podman push {img.ref}")
        for name in img.edfs:
            print(f"  EDF {rel.parent / (name + '.toml')}")
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
    s = sub.add_parser("lock", help="re-concretize envs and write their spack.lock")
    s.add_argument("envs", nargs="*", help=f"default: {' '.join(LOCKED)}")
    s = sub.add_parser("preflight", help="check that an env's externals exist on this machine")
    s.add_argument("env", help=f"one of: {', '.join(ENVS)}")
    s = sub.add_parser("containerize", help="render containers/<image>/ from envs/images and images.yaml")
    s.add_argument("images", nargs="*", help="default: all")
    s.add_argument("--check", action="store_true", help="regenerate and diff; write nothing")
    sub.add_parser("images", help="image references and their build/push commands")
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
                "preflight": cmd_preflight, "containerize": cmd_containerize, "images": cmd_images,
                "suite": cmd_suite, "report": cmd_report, "compare": cmd_compare}
    try:
        return handlers[args.cmd](args, extra)
    except CommstackError as e:
        print(f"commstack {args.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
