"""`commstack screen`: every node and link of an allocation checked side by side in one pass (commstack.screen);
`--plan --nodes N` prints what a screen of N nodes takes, running nothing."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from commstack import exits, limits, options
from commstack.config import load_system
from commstack.errors import CommstackError, printable
from commstack.files import own_dir
from commstack.paths import TOP
from commstack.run.runner import Binaries, given_run_dir, new_run_dir
from commstack.screen import output
from commstack.screen.plan import plan
from commstack.screen.run import Screen
from commstack.screen.spec import load_screen
from commstack.slurm import namespaces
from commstack.slurm.clients import client


def cmd_screen(args: argparse.Namespace, extra: list[str]) -> int:
    system = load_system(args.system)
    screen = load_screen(args.screen or ("local" if system.name.startswith("local") else "maintenance"))
    if args.apply and not args.drain:
        raise CommstackError("--apply runs the --drain lines: give both")
    if args.max_steps is not None and args.max_steps < 1:
        raise CommstackError(f"--max-steps {args.max_steps}: 1 or more steps at once")
    least = 1 if args.plan or system.name != "local-multinode" else 2
    if args.nodes is not None and args.nodes < least:
        raise CommstackError(f"--nodes {args.nodes}: " + ("at least 1 node to plan for" if args.plan else
                             "the local multi-node cluster has 2 nodes or more (one node: --system local)"))
    if args.nodes is not None and args.nodes > limits.NODES:
        raise CommstackError(f"--nodes {args.nodes}: at most {limits.NODES} nodes (commstack.limits)")
    if system.name == "local-multinode" and args.nodes and not args.plan:
        namespaces.check_count(args.nodes)  # before a results directory is made
    if args.plan:
        if not args.nodes:
            raise CommstackError("--plan needs --nodes N")
        rows, source = plan(screen, system, args.nodes, args.max_steps)
        print(f"screen {screen.name} of {args.nodes} nodes on {system.name}, "
              f"{args.max_steps or screen.max_steps} steps at once at most")
        widths = [max(len(r[i]) for r in rows + [HEAD]) for i in range(len(HEAD))]
        for r in [HEAD, *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        print(f"from: {source}")
        return exits.PASS
    run_dir = given_run_dir(own_dir(Path(args.results))) if args.results else new_run_dir(TOP / "results")
    binaries = Binaries(osu_prefix=args.osu_prefix, build_dir=run_dir / "build", build=False)
    s = Screen(system, screen, run_dir, binaries, args.slurm, args.nodes, args.max_steps)
    # the first signal is the KeyboardInterrupt the screen stops its steps on, naming it (s.steps.interrupted_by);
    # later ones wait for the clean-up
    ctrl = exits.CtrlC(lambda text: print(f"\ncommstack screen: {text}", file=sys.stderr, flush=True), s.steps)
    try:
        outcome = s.run()
        s.write(outcome, Path(args.history) if args.history else None)
    finally:
        ctrl.restore()
    f = outcome.findings
    if args.json:
        print((run_dir / "screen.json").read_text(), end="")
    else:
        for line in output.node_lines(f) + output.summary(f, outcome.not_run) + output.group_lines(outcome.records):
            print(printable(line))
        print(f"screen: {len(outcome.records)} steps on {len(outcome.nodes)} nodes in {outcome.wall_s:.0f} s; "
              f"report {outcome.report}")
    if args.drain:
        for argv in output.drain_lines(f):
            print(shlex.join(argv))
            if args.apply:
                done = client(argv, s.slurm_variables or dict(os.environ))
                if done.returncode != 0:
                    print(printable(f"commstack screen: {argv[2]}: scontrol failed: {done.stderr.strip()}"),
                          file=sys.stderr)
    if outcome.interrupted:
        print(f"commstack screen: interrupted ({s.steps.interrupted_by}): the screen above is partial", file=sys.stderr)
        return exits.signalled(ctrl.signum)
    return outcome.exit


HEAD = ["phase", "rounds", "srun steps", "at once", "expected s", "bound by"]


def add_screen(s: argparse.ArgumentParser) -> None:
    s.add_argument("screen", nargs="?", help="screens/NAME.yaml or a path (default: local on the local systems, "
                                             "else maintenance)")
    options.add(s.add_argument, ("system", "slurm", "osu_prefix", "results"),
                system={"default": "local-multinode", "help": "the system (default: local-multinode)"},
                results={"help": "a new or empty directory for the screen (default: results/<run-id>)"})
    s.add_argument("--nodes", type=int, help="the local cluster's size (local-multinode); with --plan: the nodes "
                                             "to plan for")
    s.add_argument("--max-steps", type=int, help="srun steps at once at most (default: the screen file's)")
    s.add_argument("--history", help="the SQLite history (default: results/history.sqlite)")
    s.add_argument("--drain", action="store_true", help="print the scontrol lines that drain the bad nodes")
    s.add_argument("--apply", action="store_true", help="with --drain: run them")
    s.add_argument("--plan", action="store_true", help="print rounds, steps and expected time for --nodes N")
    s.add_argument("--json", action="store_true", help="print screen.json instead of the lines")
