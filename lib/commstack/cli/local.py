"""The commands about this machine's harness: `test` (the tiers, through pytest) and `slurm` (cli.main.COMMANDS)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from commstack import exits, options
from commstack.errors import CommstackError
from commstack.files import own_dir
from commstack.paths import TOP
from commstack.slurm.cluster import LocalSlurm


#: what `bin/commstack test` runs without -m or --all: the tiers any workstation runs (unit, hostile,
#: slurm, faults); the spack tier (Spack, tens of minutes) and multinode (root, network namespaces) on demand
DEFAULT_TIERS = "not spack and not multinode"
#: pytest's exit codes (pytest.ExitCode: OK, TESTS_FAILED, INTERRUPTED, which a collection error is too,
#: INTERNAL_ERROR, USAGE_ERROR, NO_TESTS_COLLECTED) as commstack's own; a signal's is 128+N (130: Ctrl-C)
PYTEST = (exits.PASS, exits.FAILED, exits.FAILED, exits.FAILED, exits.USAGE, exits.USAGE)


def cmd_test(args: argparse.Namespace, extra: list[str]) -> int:
    """The test tiers (tests/), through pytest in its own process; JUnit XML in results/junit.xml."""
    results = own_dir(TOP / "results", private=True)
    markers = args.markers
    if markers and args.all:
        raise CommstackError("-m and --all: give one (--all runs every tier, -m picks some)")
    if not markers and not args.all and not args.paths:
        markers = DEFAULT_TIERS
        print("commstack test: tiers unit, hostile, slurm and faults; the spack and multinode tiers too: "
              "bin/commstack test --all (or -m spack, -m multinode)", flush=True)
    argv = [sys.executable, "-m", "pytest", f"--junitxml={results / 'junit.xml'}", *args.paths]
    for flag, value in (("-m", markers), ("-k", args.keywords), ("--system", args.system),
                        ("--slurm", args.slurm), ("--launcher", args.launcher), ("--osu-prefix", args.osu_prefix)):
        if value:
            argv += [flag, value]
    argv += extra
    env = {k: v for k, v in os.environ.items() if k != "COMMSTACK_INSTALL_DEPS"}  # installed above, once
    if args.osu_prefix:  # the tests that run `bin/commstack run` themselves take it from the environment
        env["COMMSTACK_OSU_PREFIX"] = args.osu_prefix
    child = subprocess.Popen(argv, cwd=TOP, env=env)
    signums: list[int] = []

    def stop(signum: int, _frame: object) -> None:  # pytest stops as at Ctrl-C: its fixtures stop their clusters
        signums.append(signum)
        if len(signums) == 1:  # the first; tests/conftest.py holds off a second (the terminal's Ctrl-C reaches both)
            child.send_signal(signum)
    for sig in exits.CtrlC.SIGNALS:
        signal.signal(sig, stop)
    rc = child.wait()
    if signums:
        print("commstack test: interrupted", file=sys.stderr)
        return exits.signalled(signums[0])
    return PYTEST[rc] if 0 <= rc < len(PYTEST) else exits.FAILED


def add_test(s: argparse.ArgumentParser) -> None:
    s.add_argument("paths", nargs="*", help="test files or directories (default: tests/)")
    s.add_argument("-m", dest="markers", help='tiers by marker, e.g. -m slurm, -m "not spack"')
    s.add_argument("--all", action="store_true", help="every tier: spack (where Spack is found) and multinode too, "
                                                      "as CI runs them")
    s.add_argument("-k", dest="keywords", help="only tests whose names match")
    # given to the tiers only when typed: pytest's own defaults are the registry's
    options.add(s.add_argument, ("system", "slurm", "launcher", "osu_prefix"),
                system={"default": None}, slurm={"default": None}, launcher={"default": None})


def cmd_slurm(args: argparse.Namespace, extra: list[str]) -> int:
    if args.nodes is not None and args.nodes < 1:
        raise CommstackError("--nodes must be 1 or more")
    if args.leaf_switches and not (args.action == "start" and (args.nodes or 1) > 1
                                   and args.leaf_switches <= args.nodes):
        raise CommstackError("--leaf-switches S goes with start --nodes N, S from 1 to N")
    n = args.nodes or (1 if args.action == "start" else None)
    clusters = []
    if n in (None, 1):
        clusters.append(LocalSlurm())
    if n != 1:
        clusters.append(LocalSlurm.multinode(n, args.leaf_switches))  # None: as many nodes as its slurm.conf names
    for cluster in clusters:
        what = f"local Slurm ({cluster.nodes} node{'s' if cluster.nodes > 1 else ''})"
        if args.action == "start":
            cluster.start(manual=True)  # held until `slurm stop`, not by this short-lived process
            print(f"{what} up: {', '.join(cluster.node_names)}; use it with: export SLURM_CONF={cluster.conf}")
        elif args.action == "stop":
            if cluster.stop(manual=True):
                print(f"{what} stopped")
            else:
                print(f"{what} still used by {', '.join(cluster.leases.live())} (pid-start time); "
                      "it stops when the last of them ends")
        else:
            print(f"{what}:\n{cluster.status()}")
    return exits.PASS


def add_slurm(s: argparse.ArgumentParser) -> None:
    s.add_argument("action", choices=("start", "stop", "status"))
    s.add_argument("--nodes", type=int, default=None,
                   help="1 (start's default): single node; N>1: N network-namespace nodes (root); "
                        "stop/status without it: both clusters")
    s.add_argument("--leaf-switches", type=int, default=0,
                   help="with start --nodes N: a topology.conf of S leaf switches (topology/tree), the nodes split "
                        "evenly in order (commstack screen's groups)")
