"""A run: suite steps on one system, in one Slurm allocation, each launched here (srun, or mpirun) and taken
through run.lifecycle; the pytest plugin drives it, one test item per step. close() releases the allocation and
the Slurm the run started, and records every step it never reached (not-run, with the reason).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from commstack import benchmarks, exits
from commstack.config import System
from commstack.errors import CommstackError, LaunchError, ParseError
from commstack.files import FileWriteError, own_dir
from commstack.results.records import Plan, Record
from commstack.results.references import references_of
from commstack.run import doubts
from commstack.run.binaries import Binaries
from commstack.run.facts import parse_probe, probe_argv
from commstack.run.launch import Allocation, Launcher, Step, StepResult
from commstack.run.lifecycle import Executor, Lifecycle, launched_step, launches, raw_dir
from commstack.run.steps import SuiteStep
from commstack.slurm.cluster import take_slurm

#: the phases of a run's timings; build: finding or building the binaries
PHASES = ("slurm start", "allocation", "build", "steps", "report", "release")


class ResultsDirError(CommstackError):
    """A results directory given to a run already holds something: runs are never mixed."""


def new_run_dir(root: Path, latest: bool = True) -> Path:
    """results/<date-time-microseconds>-<random>, created exclusively, 0750 less the umask, in a results/
    that is ours and private (files.own_dir), and (latest=True) results/latest pointing at it."""
    root = own_dir(root, private=True)
    run_id = datetime.now().strftime("%Y%m%d-%H%M%S-%f-") + secrets.token_hex(3)
    path = root / run_id
    try:  # exclusive: of two runs in the same microsecond, the random part tells them apart
        path.mkdir(mode=0o750)
    except OSError as e:
        raise FileWriteError.of(path, e) from e
    if latest:
        link = root / f".latest.{run_id}"
        link.symlink_to(run_id)
        os.replace(link, root / "latest")
    return path


def check_results_dir(path: Path) -> None:
    """A --results directory may be new or empty, never one that holds another run's files."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise ResultsDirError(f"--results {path} exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        raise ResultsDirError(f"--results {path} exists and is not empty; give a new or empty directory "
                              "(or none: a new results/<run-id>)")


def given_run_dir(path: Path) -> Path:
    """The --results directory, checked and made."""
    check_results_dir(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FileWriteError.of(path, e) from e
    return path


def substitute(argv: list[str], binaries: dict[str, str]) -> list[str]:
    """`$OSU_MPI/pt2pt/osu_bw` -> the real path; other arguments unchanged."""
    return [binaries.get(head, head) + sep + rest for head, sep, rest in (arg.partition("/") for arg in argv)]


def probe_step(step: Step, programs: dict[str, str] | None = None) -> Step:
    """The facts probe, placed exactly like `step` (nodes, ranks, GPU binding, container); `programs`: the
    env's fi_info and ucx_info (Binaries.facts_programs)."""
    return dataclasses.replace(step, name=f"{step.name}-probe", argv=probe_argv(step.argv[0], programs),
                               timeout_s=120, probe=True)


class Run(Lifecycle, Executor):
    """One run of suite steps on a system: its results directory, Slurm, allocation and records; the executor of
    its steps (lifecycle.Executor)."""

    def __init__(self, system: System, results: Path, binaries: Binaries, launcher: str = "srun",
                 slurm: str = "auto"):
        super().__init__(results, system, references_of(system))
        self.binaries = binaries
        self.launcher_kind, self.slurm_mode = launcher, slurm
        self.planned: list[SuiteStep] = []
        self._cleanup = contextlib.ExitStack()
        self._launcher: Launcher | None = None
        self._variables: dict[str, str] | None = None
        self._slurm_error: CommstackError | None = None  # a Slurm that failed to start is not tried again
        self._facts: dict[tuple, dict] = {}  # placement -> stack facts, probed once per run
        #: where the run's time went (seconds), each phase of PHASES without the phases inside it
        self.timings: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._inner = 0.0
        binaries.build_dir = binaries.build_dir or results / "build"

    @contextlib.contextmanager
    def phase(self, name: str):
        """Adds the time spent inside to timings[name], less the time of the phases nested in it."""
        t0, outer, self._inner = time.monotonic(), self._inner, 0.0
        try:
            yield
        finally:
            spent = time.monotonic() - t0
            self.timings[name] += spent - self._inner
            self._inner = outer + spent

    # ---- resources, made when the first step needs them and released by close()

    def slurm_variables(self) -> dict[str, str]:
        """The site's Slurm, or the embedded one under this run's lease (never a production queue by
        accident: the local systems get the embedded Slurm under --slurm auto)."""
        if self._slurm_error:
            raise self._slurm_error
        if self._variables is None:
            try:
                self._variables = take_slurm(self.system.name, self.slurm_mode, self._cleanup, self.system.nodes,
                                             "use --launcher mpirun to run without it",
                                             lambda: self.phase("slurm start"))
            except CommstackError as e:
                self._slurm_error = e
                raise
        return self._variables

    def launcher(self) -> Launcher:
        if self._launcher is None:
            if self.launcher_kind == "mpirun":
                self._launcher = Launcher(self.system, "mpirun", mpirun=self.binaries.mpirun())
            else:
                variables = self.slurm_variables()
                runnable = [s.step for s in self.planned if not s.not_run]
                nodes = max([min(self.system.nodes, 2)] + [st.nodes for st in runnable])  # the largest step
                ntasks = max([2 * nodes] + [st.ntasks for st in runnable])
                with self.phase("allocation"):
                    alloc = self._cleanup.enter_context(Allocation(self.system, variables, nodes=nodes, ntasks=ntasks))
                self._launcher = Launcher(self.system, "srun", slurm_variables=variables, allocation=alloc)
        return self._launcher

    # ---- steps

    def execute(self, s: SuiteStep) -> Record:
        if not self.records:  # before the first step: what the run set out to do
            Plan(system=str(self.system.path), steps=self.plan(self.planned)).write(self.dir)
        with self.phase("steps"):
            return self.perform(self._index(s), s, self)

    def watch(self, record: Record):
        return doubts.checked(record, self.dir)

    def prepare(self, s: SuiteStep, record: Record) -> tuple[Step, dict]:
        with self.phase("build"):
            binaries = self.binaries.resolve(s)
            argv = substitute(s.step.argv, binaries)
        tool = benchmarks.get(s.benchmark).tool
        if binaries:
            record.binary = self.binaries.record(tool, binaries[tool.placeholder], argv)
        step = launched_step(s, argv)
        if binaries and self.system.node.gpus == 0 and (extra := self.binaries.without_driver()):
            given = {**self.system.variables, **step.variables}
            extra["LD_LIBRARY_PATH"] = ":".join(p for p in (given.get("LD_LIBRARY_PATH"), extra["LD_LIBRARY_PATH"])
                                                if p)  # the stubs last: whatever the system puts first wins
            step = dataclasses.replace(step, variables={**step.variables, **extra})
            record.binary["cuda_driver"] = ("no GPU on these nodes: the env's CUDA driver stubs, host memory ("
                                            + ", ".join(f"{k}={v}" for k, v in extra.items()) + ")")
        launcher = self.launcher()
        launcher.check_alive(step)  # a step after a lost allocation leaves no directory behind
        record.nodelist = launcher.nodelist(step)
        return step, self.facts(launcher, step, record.dirname)

    def repeats(self, s: SuiteStep, step: Step, record: Record) -> Iterator[StepResult]:
        return launches(self.launcher(), self.dir, s, step, record)

    def facts(self, launcher: Launcher, step: Step, dirname: str) -> dict:
        """The stack facts of the step's placement (its probe's command line: nodes, ranks, GPU binding, container,
        binary; and its variables): probed (output in steps/<dirname>/probe) by the first step placed so; later
        ones name that probe's directory. A probe that fails costs the facts, not the step."""
        key = tuple(launcher.command(probe_step(step))), tuple(sorted(step.variables.items()))
        if key not in self._facts:
            outdir = raw_dir(self.dir, dirname, "probe")
            try:
                found = parse_probe(launcher.run(probe_step(step, self.binaries.facts_programs()), outdir).stdout)
            except (LaunchError, ParseError) as e:
                found = {"probe_error": f"{type(e).__name__}: {e}"}
            self._facts[key] = {**found, "probe": str(outdir.relative_to(self.dir))}
        return self._facts[key]

    def _index(self, s: SuiteStep) -> int:
        return next((i for i, p in enumerate(self.planned) if p is s), len(self.planned))

    def close(self, interrupted: bool = False) -> list[Record]:
        """Release what the run holds and record every planned step it never reached."""
        try:
            with self.phase("release"):
                self._cleanup.close()
        finally:
            why = f"interrupted ({self.interrupted_by}) before this step" if interrupted else \
                "the run ended before this step"
            for s in self.planned:
                if (s.tags["suite"], s.id) not in self.records:
                    self.ended(self._index(s), s, why)
        return list(self.records.values())


def exit_status(records: list[Record], allow_not_run: bool = False) -> int:
    """0: every step ran and passed; 1: some step did not pass; 3: the rest passed but some did not run."""
    if any(r.verdict not in ("pass", "not-run") for r in records):
        return exits.FAILED
    if any(r.verdict == "not-run" for r in records) and not allow_not_run:
        return exits.NOT_RUN
    return exits.PASS
