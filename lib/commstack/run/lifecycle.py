"""A step's life, whatever runs it (docs/architecture.md#one-step-whatever-runs-it): every record of the harness
is made, settled and saved here. Ctrl-C (or the signal in `interrupted_by`) records the step as interrupted with
what it kept, and is raised again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import ContextManager, Protocol

from commstack import benchmarks
from commstack.benchmarks import METRICS
from commstack.config import System
from commstack.errors import (BinaryNotFoundError, CommstackError, SlurmUnavailableError, StepCrashedError,
                              ValidationFailedError)
from commstack.files import FileWriteError, UnsafePathError, make_dirs
from commstack.results.judge import judge
from commstack.results.parse import parse_output, validated, validation_failure
from commstack.results.records import Record
from commstack.results.references import References
from commstack.run.facts import lower_layer_problem
from commstack.run.launch import Launcher, Step, StepResult
from commstack.run.pair import repeat_step
from commstack.run.steps import SuiteStep
from commstack.spack.trust import UntrustedPathError
from commstack.tools.lines import Sweep

#: named errors that mean a step could not start (not-run); any other named error is a failure
NOT_STARTED = (BinaryNotFoundError, SlurmUnavailableError, UnsafePathError, UntrustedPathError)


@dataclasses.dataclass(frozen=True)
class StepOutcome:
    """What a step's raw outputs, its nodes' facts and the references say of it, decided in one place (evaluate,
    failure, interrupted)."""

    verdict: str
    reason: str = ""
    error_kind: str | None = None
    validated: str | None = None   # yes, no or failed: Record.validated
    detail: str = ""
    title: str | None = None
    version: str | None = None
    repeats: tuple[tuple[dict, ...], ...] = ()   # parsed rows, one tuple per repeat (those parsed before a failure)
    notes: tuple[str, ...] = ()
    stack: tuple[tuple[str, object], ...] = ()


def _kept(sweeps: list[Sweep]) -> dict:
    return {"repeats": tuple(tuple(sw.rows) for sw in sweeps),
            "notes": tuple(f"repeat {i}, {n}" for i, sw in enumerate(sweeps, 1) for n in sw.notes)}


def evaluate(s: SuiteStep, sweeps: list[Sweep], out: str, stack: dict, system: System,
             references: References | None) -> StepOutcome:
    """The outcome of a step from its parsed repeats, the last repeat's whole output `out` (a tool's stack lines)
    and the facts of its nodes: a pure function, the same for every executor."""
    verdict = judge(sweeps, s.tags, references, s.metric, system.node.nic_line_rate_MBps, system.name)
    reason, detail = verdict.reason, verdict.summary()
    # the worst of the repeats: one that checked no data leaves the step unvalidated
    checked = max((validated(sw) for sw in sweeps), key=("yes", "no", "failed").index)
    outcome = verdict.verdict
    if s.require_validation and checked == "no" and outcome != "fail":
        outcome = "fail"
        reason = (f"not validated: {s.benchmark} checked no data (OSU without -c, nccl-tests -c 0), and the suite or "
                  "system requires validation (require_validation: true)")
        detail += f"\n  validation: {reason}"
    tool = benchmarks.get(s.benchmark).tool
    found, problem = tool.stack(out, system, s.tags) if tool.stack else ({}, None)
    facts = {**stack, "gpu_binding": system.launcher.gpu_binding, **found}
    # the provider and transports the system expects, on the nodes of a step of their layer
    fabric = system.fabric
    problem = problem or (fabric and lower_layer_problem(tool.layer, fabric.provider, fabric.ucx_transports,
                                                         stack.get("nodes", {})))
    if problem:
        outcome, reason = "fail", problem
        detail += f"\n  stack: {problem}"
    return StepOutcome(outcome, reason, None, checked, detail, sweeps[0].title, sweeps[0].version,
                       stack=tuple(facts.items()), **_kept(sweeps))


def failure(e: CommstackError, sweeps: list[Sweep]) -> StepOutcome:
    """A named error as the outcome: what could not start is not-run, what broke is fail."""
    verdict = "not-run" if isinstance(e, NOT_STARTED) else "fail"
    return StepOutcome(verdict, str(e), e.kind, "failed" if isinstance(e, ValidationFailedError) else None,
                       **_kept(sweeps))


@contextlib.contextmanager
def validation_first(s: SuiteStep, step: Step, outdir: Path):
    """A step that exits non-zero after its benchmark said its data check failed is validation-failed."""
    try:
        yield
    except StepCrashedError as e:
        failed = validation_failure(s.benchmark, (outdir / "stdout.txt").read_bytes().decode(errors="replace"),
                                    step.argv[1:], step.ntasks)
        if failed:
            raise failed from e
        raise


def launched_step(s: SuiteStep, argv: list[str]) -> Step:
    """The step as launched: real binaries, and the variables its tool needs (nccl-tests: NCCL_DEBUG=INFO,
    so that its output names the net plugin)."""
    tool = benchmarks.get(s.benchmark).tool
    return dataclasses.replace(s.step, argv=argv, variables={**s.step.variables, **dict(tool.variables)})


def raw_dir(run_dir: Path, dirname: str, name: str) -> Path:
    """steps/<dirname>/<name> for a step's raw output, made without following a symlink (files.make_dirs)."""
    try:
        return make_dirs(run_dir, "steps", dirname, name)
    except OSError as e:
        raise FileWriteError.of(run_dir / "steps" / dirname / name, e) from e


class Executor(Protocol):
    """What runs a step's repeats and hands over their raw outputs, each after the one before was parsed (a repeat
    that does not parse stops the step); it writes only what happened to the launch into the record (binary,
    nodes, the output a failed repeat kept)."""

    #: True: the step's time is the wall clock around it here; False: the executor writes its repeats' own
    clocked: bool = True

    def watch(self, record: Record) -> ContextManager:
        """Around the step: a run's doubts about this machine (run.doubts); none by default."""
        return contextlib.nullcontext()

    def prepare(self, s: SuiteStep, record: Record) -> tuple[Step, dict]:
        """The step as launched, and the facts of its nodes."""

    def repeats(self, s: SuiteStep, step: Step, record: Record) -> Iterator[StepResult]: ...


def launches(launcher: Launcher, run_dir: Path, s: SuiteStep, step: Step, record: Record,
             keep_failed: bool = True) -> Iterator[StepResult]:
    """The repeats of a step launched here (srun or mpirun) into steps/<dirname>/repeat-N; `keep_failed`: a repeat
    that failed or was interrupted names the output it kept in the record."""
    for r in range(s.repeats):
        outdir = raw_dir(run_dir, record.dirname, f"repeat-{r}")
        try:
            with validation_first(s, step, outdir):
                result = launcher.run(repeat_step(step, outdir), outdir)
        except BaseException:
            if keep_failed and (outdir / "stdout.txt").exists():
                record.outputs.append(str(outdir.relative_to(run_dir)))
            raise
        yield result


class Lifecycle:
    """The records of one run (or screen, or collected batch job), by (suite, step): each made, performed,
    settled and saved here. A record that cannot be written is noted in it, the first such error kept in
    `unsaved` (a full results file system: the steps after it are not launched) and its key in `unsaved_records`."""

    def __init__(self, run_dir: Path, system: System, references: References | None):
        self.dir, self.system, self.references = run_dir, system, references
        self.id = run_dir.name
        self.records: dict[tuple[str, str], Record] = {}
        self.unsaved: FileWriteError | None = None
        self.unsaved_records: set[tuple[str, str]] = set()
        self.interrupted_by = "Ctrl-C"  # or the signal that ended the run instead (exits.CtrlC sets it)

    def new(self, index: int, s: SuiteStep, reason: str | None = None, **launch) -> Record:
        """A step's record before it runs: not-run, with the reason it cannot run, if any."""
        return Record(**{"verdict": "not-run", **launch}, run_id=self.id, index=index, suite=s.tags["suite"],
                      system=self.system.name, step=s.id, benchmark=s.benchmark, tool=s.tool, tags=s.tags,
                      metric=s.metric, unit=METRICS[s.metric].unit, reason=s.not_run or reason or "")

    def plan(self, steps: Iterable[SuiteStep]) -> list[Record]:
        """What a run sets out to do (records.Plan): every step as the not-run record it starts as."""
        return [self.new(i, s) for i, s in enumerate(steps)]

    def perform(self, index: int, s: SuiteStep, executor: Executor, reason: str | None = None,
                nodelist: Iterable[str] = ()) -> Record:
        """The step run by `executor`, evaluated and saved; never raises a CommstackError."""
        record = self.new(index, s, reason, nodelist=list(nodelist))
        self.records[record.key] = record
        if self.unsaved and not record.reason:
            record.error_kind = self.unsaved.kind
            record.reason = f"the results directory cannot be written ({self.unsaved})"
        if record.reason:
            return self.save(record)
        sweeps: list[Sweep] = []
        outcome = None
        if executor.clocked:
            record.started, t0 = time.time(), time.monotonic()
        try:
            with executor.watch(record):
                try:
                    step, stack = executor.prepare(s, record)
                    out = ""
                    for result in executor.repeats(s, step, record):
                        record.outputs.append(str(result.outdir.relative_to(self.dir)))
                        record.commands.append(result.command)
                        record.nodelist = result.nodelist
                        sweeps.append(parse_output(s.benchmark, result.stdout, result.step.argv[1:],
                                                   ranks=result.step.ntasks))
                        out = result.stdout + result.stderr
                    outcome = evaluate(s, sweeps, out, stack, self.system, self.references)
                except CommstackError as e:
                    outcome = failure(e, sweeps)
                    if isinstance(e, FileWriteError):  # the results file system: no step after it is launched
                        self.unsaved = self.unsaved or e
                except KeyboardInterrupt:
                    outcome = StepOutcome("not-run", self._interruption, **_kept(sweeps))
                    raise
                finally:
                    if outcome:
                        settle(record, outcome)
                    if executor.clocked:
                        record.elapsed_s = time.monotonic() - t0
        finally:
            self.save(record)
        return record

    def ended(self, index: int, s: SuiteStep, why: str, nodelist: Iterable[str] = (),
              verdict: str = "not-run") -> Record:
        """A planned step the run (or screen) never reached, or (fail) one whose executor died of a bug."""
        record = self.new(index, s, why, nodelist=list(nodelist), verdict=verdict)
        self.records[record.key] = record
        return self.save(record)

    def interrupted(self, record: Record) -> Record:
        """A step cancelled while it ran (the screen's Ctrl-C): not a verdict on its nodes; its output is kept."""
        record.verdict, record.reason, record.error_kind = "not-run", self._interruption, None
        return self.save(record)

    @property
    def _interruption(self) -> str:
        return f"interrupted ({self.interrupted_by}); its output so far is kept"

    def save(self, record: Record) -> Record:
        """record.json: the one writer of records."""
        try:
            record.write(self.dir)
        except FileWriteError as e:
            self.unsaved = self.unsaved or e
            self.unsaved_records.add(record.key)
            record.notes.append(f"record not saved: {e}")
        return record


def settle(record: Record, outcome: StepOutcome) -> None:
    """The outcome into the record (the launch's facts are already there)."""
    record.verdict, record.reason, record.error_kind = outcome.verdict, outcome.reason, outcome.error_kind
    record.validated, record.detail, record.title, record.version = (outcome.validated, outcome.detail,
                                                                     outcome.title, outcome.version)
    record.repeats = [list(rows) for rows in outcome.repeats]
    record.notes = [*record.notes, *outcome.notes]
    record.stack = dict(outcome.stack)
