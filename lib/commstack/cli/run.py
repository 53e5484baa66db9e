"""`run`, `suite`, `status` (cli.main.COMMANDS): a suite runs through pytest in this process, with commstack's view."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import tempfile
from pathlib import Path

import pytest

from commstack import exits, options
from commstack.config import load_suite, load_system
from commstack.errors import CommstackError, ConfigError, SlurmUnavailableError, printable
from commstack.files import FileWriteError, own_dir, results_dir
from commstack.paths import TOP
from commstack.pytest_plugin import CTRL_C, RUN
from commstack.results.references import references_of
from commstack.results.records import RecordError, binary_source, read_run
from commstack.run.launch import Launcher
from commstack.run.binaries import Binaries
from commstack.run.runner import check_results_dir, exit_status, given_run_dir, new_run_dir
from commstack.run.steps import expand
from commstack.slurm.clients import choose_slurm, embedded
from commstack.slurm.cluster import LocalSlurm
from commstack.spack.view import EnvView, load_env
from commstack.terminal.view import View
from commstack.tools import TOOLS


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    args.name = "smoke"
    return cmd_suite(args, extra)


def cmd_suite(args: argparse.Namespace, extra: list[str]) -> int:
    system, suite = load_system(args.system), load_suite(args.name)
    references_of(system)  # a bad references file is an error now, before anything is launched
    env = env_of(args, system)  # an env that cannot be used likewise, before anything is launched
    if args.submit:
        return cmd_submit(args, system, suite)
    if args.dry_run:
        return _dry_run(args, system, suite, env)
    if args.results:
        check_results_dir(Path(args.results))
    if args.launcher == "srun" and embedded(system.name, args.slurm):
        # a state directory someone else prepared, or no root, is refused now, before anything is made or tried
        LocalSlurm.check_root()
        LocalSlurm.for_system(system.name, system.nodes).check_state()
    results = _results(args)
    argv = [str(suite.path), f"--junitxml={results / 'junit.xml'}", "-p", "no:cacheprovider", "-v",
            "--rootdir", str(TOP), "-c", str(TOP / "pytest.ini"),
            "-p", "no:hypothesispytest"]  # the tests' plugin: a suite does not need it, and it costs 0.2-1.3 s
    given = {**vars(args), "results": results, "env": env.path if env else None}  # to the plugin: each one set
    argv += [f"--{n.replace('_', '-')}" + ("" if options.OPTIONS[n].get("action") else f"={given[n]}")
             for n in options.OPTIONS if given[n]]
    launcher = f"srun --mpi={system.launcher.mpi}" if args.launcher == "srun" else "mpirun"
    view = View(args.cmd, suite.name, system.name, launcher, results, quiet=args.quiet, json_lines=args.json,
                pytest_output=args.pytest_output)
    try:
        with view.session():  # pytest's own output to results/<run>/pytest.log (and the terminal with -v)
            rc = pytest.main(argv + extra, plugins=[view])
        run = view.config.stash.get(RUN, None) if view.config else None
        if run and run.unsaved:  # the verdicts on the terminal, since they are not all on disk
            if args.json:
                view.end(list(run.records.values()), exits.UNWRITTEN)
            else:
                verdicts(run.records.values(), run.unsaved_records, file=view.out)
            what = "results directory full" if run.unsaved.full else "results not saved"
            raise FileWriteError(f"{what}: {run.unsaved}; what was written is in {results}")
        if rc == pytest.ExitCode.INTERRUPTED:
            status = exits.signalled(view.config.stash[CTRL_C].signum if run else None)  # 143 for SIGTERM, 129 SIGHUP
            with contextlib.suppress(RecordError):  # interrupted before the first record
                view.end(read_run(results), status)
            print(f"commstack {args.cmd}: interrupted; partial results and report in {results}", file=sys.stderr)
            return status
        if rc == pytest.ExitCode.USAGE_ERROR:
            return exits.USAGE
        records = read_run(results)
        history_error = getattr(run, "history_error", None) if run else None
        status = view.end(records, exits.USAGE if history_error else exit_status(records, args.allow_not_run),
                          args.allow_not_run)
    finally:
        view.out.close()
    if history_error:  # named after the verdicts, which stand
        print(f"commstack {args.cmd}: error: history not updated: {printable(str(history_error))}", file=sys.stderr)
    return status


def env_of(args: argparse.Namespace, system) -> EnvView | None:
    """The env whose view the run takes its binaries from: --env, else the system's install: {env: ...};
    checked now (commstack.spack.view: a named error and the fixing command where it cannot be used)."""
    path = args.env or (system.install.env if system.install else None)
    if path and args.submit:
        raise ConfigError("--env (or a system's install: {env: ...}) with --submit: a batch job does not take an "
                          "env's binaries yet; run the suite without --submit")
    return load_env(Path(path)) if path else None


def add_suite(s: argparse.ArgumentParser) -> None:
    s.add_argument("name", help="a suite: suites/NAME.yaml, or a suite file")
    add_run(s)


def _results(args: argparse.Namespace) -> Path:
    """The run's directory: --results, checked to be ours (files.own_dir) and empty, else a new
    results/<run-id> in a results/ that only its owner (and group) can read."""
    if args.results:
        return given_run_dir(own_dir(Path(args.results)))
    return new_run_dir(TOP / "results")


def _dry_run(args: argparse.Namespace, system, suite, env: EnvView | None) -> int:
    binaries, given = Binaries(osu_prefix=args.osu_prefix, pingpong=args.pingpong, env=env,
                               build_dir=TOP / "results" / "<run>" / "build", build=False), {}
    for tool in TOOLS.values():
        try:
            if (found := binaries.planned(tool)) is not None:
                given[tool.name] = found
                if source := binary_source(binaries.sources.get(tool.name, {})):
                    print(printable(f"# {tool.name}: {found}, from {source}"))
        except CommstackError as e:
            print(printable(f"# {tool.name}: {e}"))
    if binaries.env and system.node.gpus == 0:  # what a run adds for the env's CUDA-aware binaries, or refuses
        try:
            if extra := binaries.without_driver():
                print(printable("# no GPU on these nodes: " + ", ".join(f"{k}={v}" for k, v in extra.items())))
        except CommstackError as e:
            print(printable(f"# no GPU on these nodes: {e}"))
    steps = expand(suite, system, binaries=given, memory_only=args.memory, native_only=args.native_only)
    launcher = Launcher(system, args.launcher, {})
    for s in steps:
        if s.not_run:
            print(printable(f"# not run on {system.name}: {s.id}: {s.not_run}"))
        else:
            print(shlex.join(launcher.command(s.step)) + (f"   # x{s.repeats}" if s.repeats > 1 else ""))
    print(f"# suite {suite.name} on {system.name}: {len(steps)} steps, "
          f"{sum(1 for s in steps if s.not_run)} not runnable here")
    return exits.PASS


def verdicts(records, unsaved=frozenset(), file=None) -> None:
    """One line per step: its verdict and reason, and whether its record was saved."""
    for r in sorted(records, key=lambda r: r.index):
        print(printable(f"  {r.verdict:12s} {r.suite}/{r.step}" + (f": {r.reason}" if r.reason else ""))
              + (" (record not saved)" if r.key in unsaved else ""), file=file)


def summary(results: Path, allow_not_run: bool) -> int:
    """A results directory's verdicts, where its report is, and the exit status of its run (status, report)."""
    records = read_run(results)
    verdicts(records)
    status = exit_status(records, allow_not_run)
    print(f"results: {results} (report: {results / 'report' / 'index.html'}); exit {status}")
    return status


def cmd_submit(args: argparse.Namespace, system, suite) -> int:
    from commstack.run import batch
    plan = batch.Plan(system=str(system.path), suite=str(suite.path), memory=args.memory,
                      native_only=args.native_only, osu_prefix=args.osu_prefix, pingpong=args.pingpong)
    if args.dry_run:
        with tempfile.TemporaryDirectory() as tmp:  # where mpi-pingpong is built for the look, then dropped
            results = Path(args.results or TOP / "results" / "RUN")
            binaries = Binaries(osu_prefix=args.osu_prefix, pingpong=args.pingpong, build_dir=Path(tmp), build=False)
            print(batch.submit(results, system, suite, binaries, plan, {}, dry_run=True), end="")
        return exits.PASS
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
    from commstack.run import batch
    from commstack.results.report import write_report
    results = Path(args.results)
    os.close(results_dir(results))  # ours, under parents nobody else can change, before its plan is read
    plan = batch.read_plan(results)
    system = load_system(plan.system)
    records = batch.status(results, batch_variables(system, getattr(args, "slurm", "auto")), wait=args.wait)
    if records is None:
        return exits.PENDING
    write_report(results, references_of(system),
                 system.node.nic_line_rate_MBps)
    return summary(results, args.allow_not_run)


def add_status(s: argparse.ArgumentParser) -> None:
    s.add_argument("results", help="the run's results directory (printed by --submit)")
    s.add_argument("--wait", action="store_true", help="block until the job ends")
    s.add_argument("--allow-not-run", action="store_true", help="exit 0 when only not-run steps are not passed")


def add_run(s: argparse.ArgumentParser) -> None:
    options.add(s.add_argument)
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
