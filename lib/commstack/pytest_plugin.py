"""The pytest plugin (entry point `pytest11`): pytest is the harness. A suite file (suites/<name>.yaml) is collected
as one test item per step of the suite expanded for --system, driven by one run.Run per session
(docs/architecture.md#one-run; a verdict as a test's outcome: docs/harness.md#verdicts-and-exit-statuses). Its
fixtures serve any test file pytest runs with the plugin (the test tiers under tests/ among them), from the same Run.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from commstack import options
from commstack.config import load_suite, load_system
from commstack.results.references import references_of
from commstack.tools import mpi_pingpong
from commstack.errors import CommstackError
from commstack.exits import CtrlC
from commstack.files import FileWriteError, own_dir, write_json
from commstack.paths import TOP
from commstack.results.records import Record
from commstack.run.launch import Launcher
from commstack.spack.view import load_env
from commstack.run.binaries import Binaries
from commstack.run.runner import Run, check_results_dir, new_run_dir
from commstack.run.steps import SuiteStep, expand
from commstack.spack import NO_SPACK, find_spack

RUN = pytest.StashKey[Run]()
STARTED = pytest.StashKey[float]()
PROGRESS = pytest.StashKey[dict]()
CTRL_C = pytest.StashKey[CtrlC]()
#: where the run's notes (a build's progress, Ctrl-C) go besides pytest's output: commstack run/suite's own view
NOTES = pytest.StashKey[Callable[[str], None]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add(parser.getgroup("commstack").addoption)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[STARTED] = time.monotonic()
    if config.getoption("--results"):
        try:
            check_results_dir(Path(config.getoption("--results")))
        except CommstackError as e:
            raise pytest.UsageError(str(e)) from None


# ---- suite files: one item per step

def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    # a suite: any YAML file under a suites/ folder, or one named on the command line
    named = parent.session.isinitpath(file_path)
    if file_path.suffix in (".yaml", ".yml") and (file_path.parent.name == "suites" or named):
        return SuiteFile.from_parent(parent, path=file_path)
    return None


class SuiteFile(pytest.File):
    def collect(self):
        config = self.config
        for s in expand(load_suite(self.path), _system(config), memory_only=config.getoption("--memory"),
                        native_only=config.getoption("--native-only")):
            yield StepItem.from_parent(self, name=s.id, suite_step=s)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None):
        if isinstance(excinfo.value, CommstackError):
            return str(excinfo.value)  # a bad suite or system file: the message, no traceback
        return super().repr_failure(excinfo, style)


class StepNotPassed(Exception):
    def __init__(self, record: Record):
        self.record = record
        super().__init__(f"{record.verdict}: {record.reason}")


class StepItem(pytest.Item):
    def __init__(self, *, suite_step: SuiteStep, **kwargs):
        super().__init__(**kwargs)
        self.suite_step = suite_step
        for mark in ("slurm",) + (("multinode",) if suite_step.step.nodes > 1 else ()):
            self.add_marker(mark)

    def runtest(self) -> None:
        record = session_run(self.config).execute(self.suite_step)
        self.user_properties.append(("verdict", record.verdict))
        if record.verdict == "not-run":
            pytest.skip(f"not run: {record.reason}")
        if record.verdict != "pass":
            raise StepNotPassed(record)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None):
        if isinstance(excinfo.value, StepNotPassed):
            r = excinfo.value.record
            kind = f" [{r.error_kind}]" if r.error_kind else ""
            return f"{r.verdict}{kind}: {r.reason}\n{r.detail}".rstrip()
        return super().repr_failure(excinfo, style)


def pytest_collection_finish(session: pytest.Session) -> None:
    steps = [i.suite_step for i in session.items if isinstance(i, StepItem)]
    session.config.stash[PROGRESS] = {"total": len(steps), "done": [], "start": None, "steps": steps}


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A suite shows which step runs, how many are left, and an estimate of the time left."""
    if not isinstance(item, StepItem):
        return
    prog = item.config.stash[PROGRESS]
    left = time_left(item.config)
    eta = f", about {left:.0f} s left" if left is not None else ""
    say(item.config, f"[step {len(prog['done']) + 1}/{prog['total']}] {item.name}{eta}", note=False)
    prog["start"] = time.monotonic()


def time_left(config: pytest.Config) -> float | None:
    """Seconds the steps not done yet should take, at the mean of those done; None before the first."""
    prog = config.stash[PROGRESS]
    done = prog["done"]
    return statistics.mean(done) * (prog["total"] - len(done)) if done else None


def say(config: pytest.Config, line: str, note: bool = True) -> None:
    """A progress line on the terminal, also from inside a step (pytest captures output there); a note
    goes to commstack's own view too, where one shows the run (commstack run/suite: pytest's output is
    then its log)."""
    if note and NOTES in config.stash:
        config.stash[NOTES](line)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if tr is None:
        return
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        tr.write_line(line)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    prog = item.config.stash.get(PROGRESS, None)
    if prog and prog["start"] is not None and isinstance(item, StepItem):
        prog["done"].append(time.monotonic() - prog["start"])
        prog["start"] = None


# ---- the session's run

def _system(config: pytest.Config):
    system = load_system(config.getoption("--system"))
    references_of(system)  # a bad references file is an error now, before anything is launched
    return system


def session_run(config: pytest.Config) -> Run:
    """The session's Run, made on first use: its results directory exists only when something runs."""
    if RUN not in config.stash:
        given = config.getoption("--results")
        if given:
            results = own_dir(Path(given))
        else:  # results/latest names runs of suite steps, not a test session's Slurm lease
            results = new_run_dir(TOP / "results", latest=bool(config.stash.get(PROGRESS, {}).get("total")))
        system = _system(config)
        env = config.getoption("--env") or (system.install.env if system.install else None)
        binaries = Binaries(osu_prefix=config.getoption("--osu-prefix"), pingpong=config.getoption("--pingpong"),
                            build=not config.getoption("--no-build"), say=lambda line: say(config, line),
                            env=load_env(Path(env)) if env else None)
        run = Run(system, results, binaries, launcher=config.getoption("--launcher"),
                  slurm=config.getoption("--slurm"))
        run.planned = config.stash[PROGRESS]["steps"] if PROGRESS in config.stash else []
        config.stash[RUN] = run
        config.stash[CTRL_C] = ctrl_c = CtrlC(lambda line: say(config, line), run)
        config.add_cleanup(ctrl_c.restore)
        config.add_cleanup(run.close)  # idempotent; here in case the session ends before pytest_sessionfinish
    return config.stash[RUN]


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int):
    """Before the rest of the session's end (JUnit XML, fixture teardown, the summary), which may fail:
    the run releases what it holds, records every step and writes its report. A JUnit file that cannot
    be written (a full results file system) is noted as unsaved, like a record."""
    run = session.config.stash.get(RUN, None)
    if run is None:
        return (yield)
    try:
        _finish(session, run, exitstatus)
        try:
            return (yield)
        except OSError as e:
            run.unsaved = run.unsaved or FileWriteError.of(Path(e.filename or run.dir / "junit.xml"), e)
    finally:
        session.config.stash[CTRL_C].restore()


def _finish(session: pytest.Session, run: Run, exitstatus: int) -> None:
    records = run.close(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
    if not session.config.getoption("--results") and not any(run.dir.iterdir()):
        # a test session that used the run only for Slurm leaves no empty results/<run> behind
        run.dir.rmdir()
        return
    if not any(isinstance(i, StepItem) for i in session.items):
        return
    path = None
    total = time.monotonic() - session.config.stash[STARTED]
    try:
        if run.unsaved is None:  # a results file system known to be full gets nothing more
            with run.phase("report"):
                from commstack.results.report import write_report  # matplotlib only when there is a report
                path = write_report(run.dir, run.references, run.system.node.nic_line_rate_MBps)
            from commstack.results import history
            run.history_error = history.add_finished(run.dir)  # results/history.sqlite, or $COMMSTACK_HISTORY
            write_json(run.dir / "timings.json", {**run.timings, "session": total})
    except FileWriteError as e:
        run.unsaved = e
    except OSError as e:  # the report's files are written by csv and matplotlib
        run.unsaved = FileWriteError.of(Path(e.filename or run.dir / "report"), e)
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if tr:
        counts = Counter(r.verdict for r in records)
        tr.write_line(f"commstack: {len(records)} steps: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
                      + (f"; report {path}" if path else f"; NOT SAVED: {run.unsaved}")
                      + (f"; history NOT updated: {run.history_error}" if getattr(run, "history_error", None) else ""))
        tr.write_line("commstack: time: " + ", ".join(f"{k} {v:.1f} s" for k, v in run.timings.items())
                      + f"; {total:.1f} s since pytest started"
                      + ("" if run.unsaved else " (timings.json)"))


def pytest_report_header(config: pytest.Config) -> list[str]:
    spack = find_spack()
    return [f"commstack: system={config.getoption('--system')} slurm={config.getoption('--slurm')}",
            f"commstack: spack tier {'enabled: ' + str(spack) if spack else 'skipped: ' + NO_SPACK}"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if find_spack() is None:
        skip = pytest.mark.skip(reason=f"spack tier: {NO_SPACK}")
        for item in items:
            if "spack" in item.keywords:
                item.add_marker(skip)


# ---- fixtures for the test tiers

@pytest.fixture(scope="session")
def system(pytestconfig: pytest.Config):
    return _system(pytestconfig)


@pytest.fixture(scope="session")
def results_dir(pytestconfig: pytest.Config) -> Path:
    return session_run(pytestconfig).dir


@pytest.fixture(scope="session")
def slurm_variables(pytestconfig: pytest.Config) -> dict[str, str]:
    """Environment for Slurm clients: a reachable cluster, else the local one the run starts."""
    mode, kind = pytestconfig.getoption("--slurm"), pytestconfig.getoption("--launcher")
    if kind == "mpirun" or mode == "off":
        pytest.skip(f"slurm tier off (--slurm={mode}, --launcher={kind})")
    try:
        return session_run(pytestconfig).slurm_variables()
    except CommstackError as e:
        if mode == "external":
            pytest.fail(str(e))
        pytest.skip(f"no Slurm here and the local one cannot start: {e}")


@pytest.fixture(scope="session")
def launcher(pytestconfig: pytest.Config, request) -> Launcher:
    """The run's launcher: srun steps in the session's one allocation (mpirun only when asked)."""
    if pytestconfig.getoption("--launcher") != "mpirun":
        request.getfixturevalue("slurm_variables")
    return session_run(pytestconfig).launcher()


@pytest.fixture(scope="session")
def pingpong_binary(pytestconfig: pytest.Config) -> Path:
    try:
        return Path(mpi_pingpong.TOOL.native(session_run(pytestconfig).binaries))
    except CommstackError as e:
        pytest.skip(str(e))


@pytest.fixture
def step_dir(request, results_dir: Path) -> Path:
    name = request.node.nodeid.replace("/", ".").replace("::", "--")
    d = results_dir / "tests" / "".join(c if c.isalnum() or c in "._-[]" else "_" for c in name)
    d.mkdir(parents=True, exist_ok=True)
    return d
