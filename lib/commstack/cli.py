"""commstack: the commands a site engineer and CI use.

  run          the main job on this machine: the smoke suite on the local Slurm, judged, reported
  test         the tests (paths, or pytest options after --), JUnit XML under results/
  setup        the pinned Spack (toolchain.yaml) and this repo's package repository
  lock [ENV]   re-concretize the GH200 envs and write their spack.lock; --check compares, writes nothing
  preflight E  before `spack install`: every external of env E exists here (prefix/module, version)
  containerize render containers/<image>/ (Containerfile, EDFs); --check diffs instead
  images       image references and the podman commands that build and push them
  mirror create ENV [DIR]  sources (and, with --key, a signed build cache) for an offline site
  suite NAME   run a suite (suites/NAME.yaml) on --system, or print its srun lines with --dry-run
  report DIR   (re)write the report of a results directory; compare A B: B against baseline A
  slurm        start | stop | status of the local embedded Slurm

Exit status of run, suite, status and report: 0 every step ran and passed; 1 some step did not pass;
3 every step that ran passed but some did not run (--allow-not-run: 0); 4 a batch job still runs;
2 bad input (a damaged history or record included); 5 results could not be written (a full or read-only
file system); 130 Ctrl-C (143 SIGTERM, 129 SIGHUP, 131 SIGQUIT: the same clean-up). Whatever input put in
what they print (names, reasons, errors) is shown with its control characters escaped.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import commstack
from commstack.config import known_systems, load_suite, load_system
from commstack.results import parse
from commstack.results.compare import NOT_RUN, compare, compare_table
from commstack.results.references import references_of
from commstack.results.records import RecordError, read_run
from commstack.run.launch import Launcher
from commstack.run.runner import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NOT_RUN, EXIT_PASS, EXIT_PENDING, EXIT_USAGE,
                                  Binaries, check_results_dir, exit_status, given_run_dir, new_run_dir)
from commstack.run.steps import expand
from commstack.tools import TOOLS
from commstack.spack import containers
from commstack.spack import envs, mirror
from commstack.spack import preflight as spack_preflight
from commstack.spack import setup as spack_setup
from commstack.spack.envs import ENVS, LOCKED
from commstack.errors import CommstackError, SlurmUnavailableError, printable
from commstack.files import FileWriteError, own_dir, regular_or_missing, write_atomic
from commstack.pytest_plugin import SessionOf
from commstack.slurm import LocalSlurm, choose_slurm, embedded
from commstack.paths import TOP
from commstack.terminal import View
from commstack.spack import find_spack, need_spack


def install_deps() -> None:
    """The Debian packages that run and test need (ci/install-deps.sh says what it installs)."""
    # its output (apt's) on stderr: stdout is the run's, possibly JSON lines
    if subprocess.call([str(TOP / "ci" / "install-deps.sh")], stdout=sys.stderr.fileno()) != 0:
        raise CommstackError("the Debian packages commstack needs could not be installed (ci/install-deps.sh)")


def cmd_test(args: argparse.Namespace, extra: list[str]) -> int:
    """The test tiers (tests/), through pytest in its own process; JUnit XML in results/junit.xml."""
    results = own_dir(TOP / "results", private=True)
    spack = find_spack()
    print(f"commstack test: spack tier {'runs with ' + str(spack) if spack else 'SKIPPED: no Spack found'}",
          flush=True)
    argv = [sys.executable, "-m", "pytest", f"--junitxml={results / 'junit.xml'}", *args.paths]
    for flag, value in (("-m", args.markers), ("-k", args.keywords), ("--system", args.system),
                        ("--slurm", args.slurm), ("--launcher", args.launcher), ("--osu-prefix", args.osu_prefix)):
        if value:
            argv += [flag, value]
    argv += extra
    env = {k: v for k, v in os.environ.items() if k != "COMMSTACK_INSTALL_DEPS"}  # installed above, once
    return subprocess.call(argv, cwd=TOP, env=env)


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
    args.name = "smoke"
    return cmd_suite(args, extra)


def cmd_setup(args: argparse.Namespace, extra: list[str]) -> int:
    return spack_setup.setup(args.spack_source, args.packages, args.force, args.detect, args.mirror)


def cmd_lock(args: argparse.Namespace, extra: list[str]) -> int:
    return envs.lock(need_spack(), args.envs, args.check)


def cmd_preflight(args: argparse.Namespace, extra: list[str]) -> int:
    return spack_preflight.run(need_spack(), args.env)


def cmd_containerize(args: argparse.Namespace, extra: list[str]) -> int:
    return containers.containerize(need_spack(), args.images, args.check)


def cmd_images(args: argparse.Namespace, extra: list[str]) -> int:
    return containers.show_images()


def cmd_mirror(args: argparse.Namespace, extra: list[str]) -> int:
    mirror.create(need_spack(), args.env, Path(args.dir) if args.dir else None, args.key)
    return 0


def cmd_suite(args: argparse.Namespace, extra: list[str]) -> int:
    """Run a suite through pytest in this process, one test per step; --dry-run: its srun lines."""
    system, suite = load_system(args.system), load_suite(args.name)
    references_of(system)  # a bad references file is an error now, before anything is launched
    if args.submit:
        return cmd_submit(args, system, suite)
    if args.dry_run:
        return _dry_run(args, system, suite)
    if args.results:
        check_results_dir(Path(args.results))
    if args.launcher == "srun" and embedded(system.name, args.slurm):
        # a state directory someone else prepared, or no root, is refused now, before anything is made or tried
        LocalSlurm.check_root()
        LocalSlurm.for_system(system.name, system.nodes).check_state()
    results = _results(args)
    argv = [str(suite.path), "--system", args.system, "--results", str(results), "--slurm", args.slurm,
            "--launcher", args.launcher, f"--junitxml={results / 'junit.xml'}", "-p", "no:cacheprovider", "-v",
            "--rootdir", str(TOP), "-c", str(TOP / "pytest.ini"),
            "-p", "no:hypothesispytest"]  # the tests' plugin: a suite does not need it, and it costs 0.2-1.3 s
    for opt in ("osu_prefix", "pingpong", "memory"):
        if getattr(args, opt):
            argv += [f"--{opt.replace('_', '-')}", getattr(args, opt)]
    argv += [f"--{flag.replace('_', '-')}" for flag in ("native_only", "no_build") if getattr(args, flag)]
    session = SessionOf()
    launcher = f"srun --mpi={system.launcher.mpi}" if args.launcher == "srun" else "mpirun"
    view = View(args.cmd, suite.name, system.name, launcher, results, quiet=args.quiet, json_lines=args.json,
                pytest_output=args.pytest_output)
    try:
        with view.session():  # pytest's own output to results/<run>/pytest.log (and the terminal with -v)
            rc = pytest.main(argv + extra, plugins=[session, view])
        run = session.run
        if run and run.unsaved:  # the verdicts on the terminal, since they are not all on disk
            if args.json:
                view.end(list(run.records.values()), FileWriteError.exit_status)
            else:
                _verdicts(run.records.values(), run.unsaved_records, file=view.out)
            what = "results directory full" if run.unsaved.full else "results not saved"
            raise FileWriteError(f"{what}: {run.unsaved}; what was written is in {results}")
        if rc == pytest.ExitCode.INTERRUPTED:
            status = 128 + session.signum if session.signum else EXIT_INTERRUPTED  # 143 for SIGTERM, 129 SIGHUP
            with contextlib.suppress(RecordError):  # interrupted before the first record
                view.end(read_run(results), status)
            print(f"commstack {args.cmd}: interrupted; partial results and report in {results}", file=sys.stderr)
            return status
        if rc == pytest.ExitCode.USAGE_ERROR:
            return EXIT_USAGE
        records = read_run(results)
        history_error = getattr(run, "history_error", None) if run else None
        status = view.end(records, EXIT_USAGE if history_error else exit_status(records, args.allow_not_run),
                          args.allow_not_run)
    finally:
        view.close()
    if history_error:  # named after the verdicts, which stand
        print(f"commstack {args.cmd}: error: history not updated: {printable(str(history_error))}", file=sys.stderr)
    return status


def _results(args: argparse.Namespace) -> Path:
    """The run's directory: --results, checked to be ours (files.own_dir) and empty, else a new
    results/<run-id> in a results/ that only its owner (and group) can read."""
    if args.results:
        return given_run_dir(own_dir(Path(args.results)))
    return new_run_dir(TOP / "results")


def _dry_run(args: argparse.Namespace, system, suite) -> int:
    binaries, given = Binaries(osu_prefix=args.osu_prefix, pingpong=args.pingpong,
                               build_dir=TOP / "results" / "<run>" / "build", build=False), {}
    for tool in (t for t in TOOLS.values() if t.planned):
        try:
            given[tool.name] = tool.planned(binaries)
        except CommstackError as e:
            print(f"# {tool.name}: {e}")
    steps = expand(suite, system, binaries=given, memory_only=args.memory, native_only=args.native_only)
    launcher = Launcher(system, args.launcher, {})
    for s in steps:
        if s.not_run:
            print(printable(f"# not run on {system.name}: {s.id}: {s.not_run}"))
        else:
            print(shlex.join(launcher.command(s.step)) + (f"   # x{s.repeats}" if s.repeats > 1 else ""))
    print(f"# suite {suite.name} on {system.name}: {len(steps)} steps, "
          f"{sum(1 for s in steps if s.not_run)} not runnable here")
    return 0


def _verdicts(records, unsaved=frozenset(), file=None) -> None:
    for r in sorted(records, key=lambda r: r.index):
        print(printable(f"  {r.verdict:12s} {r.suite}/{r.step}" + (f": {r.reason}" if r.reason else ""))
              + (" (record not saved)" if r.key in unsaved else ""), file=file)


def _summary(results: Path, allow_not_run: bool) -> int:
    records = read_run(results)
    _verdicts(records)
    status = exit_status(records, allow_not_run)
    print(f"results: {results} (report: {results / 'report' / 'index.html'}); exit {status}")
    return status


def cmd_submit(args: argparse.Namespace, system, suite) -> int:
    """The suite as one batch job (sbatch); --dry-run prints its script, --wait waits and judges."""
    from commstack.run import batch
    plan = batch.Plan(system=str(system.path), suite=str(suite.path), memory=args.memory,
                      native_only=args.native_only, osu_prefix=args.osu_prefix, pingpong=args.pingpong)
    if args.dry_run:
        with tempfile.TemporaryDirectory() as tmp:  # where mpi-pingpong is built for the look, then dropped
            results = Path(args.results or TOP / "results" / "RUN")
            binaries = Binaries(osu_prefix=args.osu_prefix, pingpong=args.pingpong, build_dir=Path(tmp), build=False)
            print(batch.submit(results, system, suite, binaries, plan, {}, dry_run=True), end="")
        return 0
    results = _results(args)
    binaries = Binaries(osu_prefix=args.osu_prefix, pingpong=args.pingpong, build_dir=results / "build",
                        build=not args.no_build)
    out = batch.submit(results, system, suite, binaries, plan, batch_variables(system, args.slurm))
    print(f"submitted batch job {out}; results in {results}; `commstack status {results}` polls it", flush=True)
    args.results = str(results)
    return cmd_status(args, []) if args.wait else 0


def batch_variables(system, mode: str) -> dict[str, str]:
    """Slurm clients' environment for a batch job: the site's Slurm, or the local one, started under
    the manual lease so that it outlives this command (`commstack slurm stop` gives it back)."""
    which = choose_slurm(system.name, mode)
    if which == "off":
        raise SlurmUnavailableError("a batch job needs Slurm (--slurm off)")
    if which == "site":
        return dict(os.environ)
    cluster = LocalSlurm.for_system(system.name, system.nodes)
    cluster.start(manual=True)
    return cluster.variables


def cmd_status(args: argparse.Namespace, extra: list[str]) -> int:
    """A batch run's job; once it ended: its results judged, the report, the exit status of the run."""
    from commstack.run import batch
    from commstack.results.report import write_report
    results = Path(args.results)
    plan = batch.read_plan(results)
    system = load_system(plan.system)
    records = batch.status(results, batch_variables(system, getattr(args, "slurm", "auto")), wait=args.wait)
    if records is None:
        return EXIT_PENDING
    write_report(results, references_of(system),
                 system.nic_line_rate_MBps)
    return _summary(results, args.allow_not_run)


def cmd_report(args: argparse.Namespace, extra: list[str]) -> int:
    from commstack.results.report import write_report
    results = Path(args.results)
    records = read_run(results)
    system = load_system(records[0].system) if records[0].system in known_systems() else None
    refs = references_of(system) if system else None
    path = write_report(results, refs, system.nic_line_rate_MBps if system else None)
    print(f"report: {path}")
    return _summary(results, args.allow_not_run)


def cmd_compare(args: argparse.Namespace, extra: list[str]) -> int:
    if args.baseline_from == "history":
        return cmd_compare_history(args)
    if args.baseline is None:
        raise CommstackError("compare needs a baseline run (compare A B) or --baseline history")
    a = read_run(Path(args.baseline))
    system = load_system(a[0].system) if a[0].system in known_systems() else None
    refs = references_of(system) if system else None
    changes = compare(Path(args.baseline), Path(args.results), args.tolerance, refs)
    print(printable(compare_table(changes), keep="\n"), end="")
    if any(c.difference for c in changes):
        return EXIT_FAILED
    return EXIT_NOT_RUN if any(c.change == NOT_RUN for c in changes) and not args.allow_not_run else EXIT_PASS


def cmd_compare_history(args: argparse.Namespace) -> int:
    """A run against the median and spread of the last N runs of each step on the same system."""
    from commstack.results import history
    results = Path(args.results)
    path = Path(args.history) if args.history else history.default_path(results.resolve().parent)
    changes = history.compare_to_history(results, path, args.last,
                                         args.tolerance if args.tolerance is not None else 0.05)
    print(f"baseline: median of the last {args.last} runs in {path}")
    print(printable(compare_table(changes).replace(f"{'A':>12s}", f"{'history':>12s}", 1), keep="\n"), end="")
    return 1 if any(c.change in ("regression", "invalid") for c in changes) else 0


def cmd_history(args: argparse.Namespace, extra: list[str]) -> int:
    """`history import DIR...` fills the history; `history` prints (and --plot draws) the trend."""
    from commstack.results import history
    path = Path(args.history) if args.history else history.default_path(TOP / "results")
    if args.action == "import":
        if not args.dirs:
            raise CommstackError("history import needs results directories")
        for d in args.dirs:
            for run, n in history.import_results(Path(d), path).items():
                print(f"history: {run}: {n} records")
        print(f"history: {path}")
        return 0
    if args.action or args.dirs:
        raise CommstackError(f"unknown history action {args.action!r} (import, or none to print the trend)")
    if args.plot not in (None, "-"):
        regular_or_missing(Path(args.plot))  # before the work, not only when it is written
    points = history.trend(path, args.system, args.suite, args.step, args.size)
    to_stdout = args.plot == "-"  # the image goes to stdout, the table to stderr
    print(printable(history.trend_table(points), keep="\n"), end="", file=sys.stderr if to_stdout else sys.stdout)
    if to_stdout:
        sys.stdout.buffer.write(history.plot(points))
    elif args.plot:
        out = Path(args.plot)
        write_atomic(out, history.plot(points, out.suffix.lstrip(".") or "png"))
        print(f"plot: {out}")
    return 0


def cmd_export(args: argparse.Namespace, extra: list[str]) -> int:
    from commstack.results.export import export, render
    if args.output == "-":
        sys.stdout.write(render(read_run(Path(args.results)), args.format))
    else:
        if args.output:
            regular_or_missing(Path(args.output))  # before the work, not only when it is written
        print(f"export: {export(Path(args.results), args.format, Path(args.output) if args.output else None)}")
    return 0


def _run_options(s: argparse.ArgumentParser) -> None:
    s.add_argument("--system", default="local", help="systems/NAME.yaml, or a system file (default: local)")
    s.add_argument("--results", help="results directory (default: a new results/<date-time>-<id>)")
    s.add_argument("--osu-prefix", default=os.environ.get("COMMSTACK_OSU_PREFIX"),
                   help="an OSU micro-benchmarks install (default: $COMMSTACK_OSU_PREFIX, else the local env's)")
    s.add_argument("--pingpong", help="an mpi-pingpong binary (default: built with the system MPI)")
    s.add_argument("--no-build", action="store_true",
                   help="never set up Spack or build OSU; steps without their binaries are not run")
    s.add_argument("--slurm", choices=("auto", "local", "external", "off"), default="auto",
                   help="auto: a reachable cluster, else the local one; local; external; off")
    s.add_argument("--launcher", choices=("srun", "mpirun"), default="srun", help="mpirun: this host, no Slurm")
    s.add_argument("--memory", choices=("host", "device"), help="only the steps in this memory")
    s.add_argument("--native-only", action="store_true", help="drop the container runs")
    s.add_argument("--allow-not-run", action="store_true",
                   help="exit 0 when every step that ran passed, even if some did not run")
    s.add_argument("--dry-run", action="store_true", help="print the srun lines (with --submit: the job script)")
    s.add_argument("--submit", action="store_true", help="submit the suite as one batch job (sbatch) and return")
    s.add_argument("--wait", action="store_true", help="with --submit: wait for the job, exit with the run's status")
    shown = s.add_mutually_exclusive_group()
    shown.add_argument("-v", "--pytest-output", action="store_true",
                       help="show pytest's own output too (always in results/<run>/pytest.log)")
    shown.add_argument("-q", "--quiet", action="store_true", help="only the summary and the exit status")
    shown.add_argument("--json", action="store_true",
                       help="one JSON object per line: run-started, step-started, step-ended, note, error, run-ended")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="commstack", description=__doc__, allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"commstack {commstack.__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    _run_options(sub.add_parser("run", help="the main job on this machine: the smoke suite"))
    s = sub.add_parser("test", help="run the tests; other pytest options after --")
    s.add_argument("paths", nargs="*", help="test files or directories (default: tests/)")
    s.add_argument("-m", dest="markers", help='tiers by marker, e.g. -m slurm, -m "not spack"')
    s.add_argument("-k", dest="keywords", help="only tests whose names match")
    s.add_argument("--system", help="the system the slurm tier runs on (default: local)")
    s.add_argument("--slurm", choices=("auto", "local", "external", "off"), help="which Slurm (default: auto)")
    s.add_argument("--launcher", choices=("srun", "mpirun"), help="mpirun: this host, no Slurm")
    s.add_argument("--osu-prefix", help="an OSU install for the tests that run OSU")
    s = sub.add_parser("slurm", help="local embedded Slurm")
    s.add_argument("action", choices=("start", "stop", "status"))
    s.add_argument("--nodes", type=int, default=None,
                   help="1 (start's default): single node; N>1: N network-namespace nodes (root); "
                        "stop/status without it: both clusters")
    s = sub.add_parser("setup", help="pinned Spack and package repositories")
    s.add_argument("--spack-source", help="local path or git mirror of Spack (offline)")
    s.add_argument("--packages", help="local spack-packages checkout or mirror (offline)")
    s.add_argument("--force", action="store_true",
                   help="accept a SPACK_ROOT of another major.minor, or a git checkout (SPACK_ROOT, --packages) "
                        "at another commit than the pinned one")
    s.add_argument("--detect", action="store_true", help="detect this machine's externals again")
    s.add_argument("--mirror", help="a mirror made by `commstack mirror create`: every env uses it (offline)")
    s = sub.add_parser("lock", help="re-concretize envs and write their spack.lock")
    s.add_argument("envs", nargs="*", help=f"default: {' '.join(LOCKED)}")
    s.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 naming each env, node and field where the committed lock differs")
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
    s.add_argument("name", help="a suite: suites/NAME.yaml, or a suite file")
    _run_options(s)
    s = sub.add_parser("report", help="write results/<run>/report/ (HTML, Markdown, CSV, plots) again")
    s.add_argument("results", help="a results directory")
    s.add_argument("--allow-not-run", action="store_true", help="exit 0 when only not-run steps are not passed")
    s = sub.add_parser("status", help="a batch run: its job's state; once it ended, its results judged")
    s.add_argument("results", help="the run's results directory (printed by --submit)")
    s.add_argument("--wait", action="store_true", help="block until the job ends")
    s.add_argument("--allow-not-run", action="store_true", help="exit 0 when only not-run steps are not passed")
    s = sub.add_parser("compare", help="a run against a baseline run (or the history); exit 1 on any difference, "
                                       "3 when a step ran on neither side")
    s.add_argument("baseline", nargs="?", help="the baseline run (none with --baseline history)")
    s.add_argument("results")
    s.add_argument("--baseline", dest="baseline_from", choices=("history",),
                   help="history: the median and spread of the last --last runs of each step on the system")
    s.add_argument("--tolerance", type=float, default=None,
                   help="relative change always allowed (default: the references' lower tolerance, else 0.05)")
    s.add_argument("--last", type=int, default=10, help="with --baseline history: how many earlier runs")
    s.add_argument("--allow-not-run", action="store_true", help="exit 0, not 3, when a step ran on neither side")
    s.add_argument("--history", default=os.environ.get("COMMSTACK_HISTORY"),
                   help="history file (default: $COMMSTACK_HISTORY, else history.sqlite beside the run)")
    s = sub.add_parser("history", help="the trend of each step's figure over runs; `history import DIR` fills it")
    s.add_argument("action", nargs="?", help="import: add results directories (runs, or directories of runs)")
    s.add_argument("dirs", nargs="*")
    s.add_argument("--history", default=os.environ.get("COMMSTACK_HISTORY"),
                   help="history file (default: $COMMSTACK_HISTORY, else results/history.sqlite)")
    for opt in ("system", "suite", "step"):
        s.add_argument(f"--{opt}", help=f"only this {opt}")
    s.add_argument("--size", type=int, help="only this message size (bytes)")
    s.add_argument("--plot", help="draw the trend into this file (PNG, or .svg, .pdf; - for PNG on stdout); "
                                  "an existing one must be a regular file")
    s = sub.add_parser("export", help="a run's figures as a file: perflog, jsonl, bmf (bencher.dev), elastic")
    s.add_argument("results", help="a results directory")
    s.add_argument("--format", required=True, choices=("perflog", "jsonl", "bmf", "elastic"))
    s.add_argument("--output", help="the file (default: <run>/export/<run>.<suffix>; - for stdout); an existing "
                                    "one must be a regular file")
    s = sub.add_parser("parse", help="parse and check a benchmark output (exit 0: complete and valid)",
                       epilog=parse.PARSE_HELP)
    s.add_argument("file", help="the output (stdout) of an OSU 5.x-7.5, nccl-tests or mpi-pingpong run")
    s.add_argument("--args", default="", help='the benchmark\'s own arguments, e.g. --args="-m 1:1048576" '
                                              '(default: none, so the benchmark\'s default sizes)')
    s.add_argument("--ranks", type=int, help="ranks of the run (OSU collectives shrink their sizes with many)")
    s.add_argument("--json", action="store_true", help="print benchmark, version, columns with units and rows")
    for s in sub.choices.values():
        s.allow_abbrev = False  # `run --sys x` is a mistyped flag, not --system
    return p


HANDLERS = {"run": cmd_run, "test": cmd_test, "slurm": cmd_slurm, "setup": cmd_setup, "lock": cmd_lock,
            "preflight": cmd_preflight, "containerize": cmd_containerize, "images": cmd_images,
            "mirror": cmd_mirror,
            "suite": cmd_suite, "report": cmd_report, "status": cmd_status,
            "history": cmd_history, "export": cmd_export, "compare": cmd_compare,
            "parse": lambda a, _: parse.parse_command(a.file, a.args, a.json, a.ranks)}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Only what follows `--` passes through (to pytest); everything before it is ours, strictly.
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    p = parser()
    args, unknown = p.parse_known_args(argv[:argv.index("--")] if "--" in argv else argv)
    if unknown:  # a mistyped option is an error, never passed on
        p.error(f"{args.cmd}: unrecognized arguments: {' '.join(unknown)}")
    if extra and args.cmd not in ("test", "run", "suite"):
        p.error(f"{args.cmd} takes no arguments after --")
    try:
        if args.cmd in ("run", "test") and os.environ.get("COMMSTACK_INSTALL_DEPS") == "1":
            install_deps()  # bin/commstack's first use: once the command line is known to be right
        return HANDLERS[args.cmd](args, extra)
    except CommstackError as e:
        print(f"commstack {args.cmd}: error: {printable(str(e), keep=chr(10))}", file=sys.stderr)
        return getattr(e, "exit_status", EXIT_USAGE)
    except KeyboardInterrupt:
        print(f"commstack {args.cmd}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
