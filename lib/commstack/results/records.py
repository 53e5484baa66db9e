"""Records: what one step of a run left, written once as steps/<step>/record.json and read back through the
same type, checked by its schema (RecordError naming the file and the key); and the run's plan (plan.json),
written before its first step: every expanded step as its not-run record, and for a batch run the job.
"""

from __future__ import annotations

import math
import os
import statistics
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, model_validator

from commstack.benchmarks import METRICS
from commstack.config import MAX_MESSAGE, Line, SafeName, check_name
from commstack.errors import CommstackError
from commstack.files import FileWriteError, UnsafePathError, make_dirs, read_bounded, results_dir, write_atomic

Verdict = Literal["pass", "no-reference", "unstable", "degraded", "fail", "not-run"]
RECORD = "record.json"
PLAN = "plan.json"
LOST = "no record written (run interrupted or lost)"


class RecordError(CommstackError):
    """A record.json that is missing, truncated or not a record."""


#: a step's name: a suite's step id (SafeName) with its mode, node and rank counts, memory and environment
StepName = Annotated[str, AfterValidator(lambda v: check_name(v, 180))]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: Line
    index: int                             # the step's place in the run, for reports in suite order
    suite: SafeName
    system: SafeName
    step: StepName                         # unique in its suite: benchmark, mode, nodes, ranks, memory, environment
    benchmark: str
    tool: str
    tags: dict[str, str | bool | int | float | None]  # scalars: the report groups and names files by them
    metric: str
    unit: str
    verdict: Verdict
    reason: str = ""                       # the first thing wrong, in one line
    error_kind: str | None = None          # the kind of the named error (errors.py: crashed, timed-out, ...)
    #: whether the benchmark checked its data: yes, no (OSU without -c, nccl-tests -c 0) or failed; None: no output
    validated: Literal["yes", "no", "failed"] | None = None
    notes: list[str] = []                  # known launcher and runtime lines of the output (tools.noise)
    detail: str = ""                       # the judge's summary, point by point
    title: str | None = None
    version: str | None = None
    commands: list[list[str]] = []
    nodelist: list[str] = []
    repeats: list[list[dict[str, Any]]] = []   # parsed rows, one list per repeat
    outputs: list[str] = []                # raw output directories of the repeats, relative to the run
    stack: dict[str, Any] = {}
    #: the native binary: its path and, from an env, the env, its lock's sha256, its spec and the env's MPI
    binary: dict[str, str] = {}
    started: float | None = None
    elapsed_s: float = 0.0
    machine: dict[str, Any] = {}           # this host's load less the step's own ranks (run.doubts)
    warnings: list[str] = []               # doubts about its figures: a busy machine, far off its own history

    @model_validator(mode="after")
    def _rows_hold_the_figures(self) -> "Record":
        """Every row has its size in bytes and the judged metric as a number (null: not finite)."""
        if self.metric not in METRICS:
            raise ValueError(f"metric: unknown metric {self.metric!r}; known: {', '.join(sorted(METRICS))}")
        if self.unit != METRICS[self.metric].unit:
            raise ValueError(f"unit: {self.unit!r}, but {self.metric} is in {METRICS[self.metric].unit}")
        for i, rows in enumerate(self.repeats):
            for j, row in enumerate(rows):
                size, value = row.get("size"), row.get(self.metric)
                if type(size) is not int or not 0 <= size <= MAX_MESSAGE:
                    raise ValueError(f"repeats.{i}.{j}.size: {'no size' if size is None else repr(size)[:40]}; "
                                     f"a row's size is a byte count, 0 to {MAX_MESSAGE}")
                if self.metric not in row or value is not None and type(value) not in (int, float):
                    got = repr(value)[:40] if self.metric in row else f"no {self.metric}"
                    raise ValueError(f"repeats.{i}.{j}.{self.metric}: {got}; the judged figure is a number (null "
                                     "where it was not finite)")
        return self

    @property
    def key(self) -> tuple[str, str]:
        return self.suite, self.step

    @property
    def dirname(self) -> str:
        return f"{self.suite}--{self.step}"

    def write(self, run_dir: Path) -> Path:
        """steps/<suite>--<step>/record.json, its directories made without following a symlink."""
        try:
            path = make_dirs(run_dir, "steps", self.dirname) / RECORD
        except OSError as e:
            raise FileWriteError.of(run_dir / "steps" / self.dirname, e) from e
        write_atomic(path, self.model_dump_json(indent=2) + "\n")
        return path

    @classmethod
    def read(cls, path: Path) -> "Record":
        return _read(cls, path, "record")

    def values(self) -> dict[int, list[float]]:
        """size -> the judged metric of every repeat, in size order."""
        by_size: dict[int, list[float]] = {}
        for rows in self.repeats:
            for row in rows:
                # a non-finite value is written as null (and Infinity in a file read as one): NaN, never drawn
                value = row.get(self.metric)
                finite = value is not None and math.isfinite(value)
                by_size.setdefault(row["size"], []).append(float(value) if finite else float("nan"))
        return dict(sorted(by_size.items()))

    def medians(self) -> dict[int, tuple[float, float, int]]:
        """size -> (median, standard deviation, number of repeats) of the judged metric."""
        return {s: (statistics.median(v), _stdev(v), len(v)) for s, v in self.values().items()}

    def means(self) -> dict[int, tuple[float, float]]:
        """size -> (mean, standard deviation) of the judged metric: seed 001's statistics."""
        return {s: (statistics.mean(v), _stdev(v)) for s, v in self.values().items()}


def _stdev(values: list[float]) -> float:
    """0 for one repeat; NaN where a repeat is (statistics.stdev fails on NaN: AttributeError on 3.11)."""
    if len(values) < 2:
        return 0.0
    return statistics.stdev(values) if all(map(math.isfinite, values)) else math.nan


class Plan(BaseModel):
    """What a run set out to do, written before its first step (one source for the interactive and
    the batch runner). A batch run also names its job and what `commstack status` needs to judge it."""

    model_config = ConfigDict(extra="forbid")

    system: str                                 # the system file
    steps: list[Record] = []                    # every expanded step, as its not-run record
    suite: str | None = None                    # batch: the suite file, expanded again when collected
    job_id: str | None = None
    memory: str | None = None
    native_only: bool = False
    osu_prefix: str | None = None
    pingpong: str | None = None
    commands: dict[str, list[list[str]]] = {}   # step dirname -> [probe command, repeat command]
    collected: str | None = None                # the job's final state, once its results were judged

    def write(self, run_dir: Path) -> None:
        write_atomic(run_dir / PLAN, self.model_dump_json(indent=2) + "\n")


def binary_source(binary: dict[str, str]) -> str:
    """Where a step's binary came from, in words: the env's spec, its lock and MPI, or what named it (an option,
    COMMSTACK_OSU_PREFIX)."""
    if "spec" in binary:
        mpi = "".join(f", {what} {binary[key]}" for key, what in (("mpi", "MPI"), ("pmix", "PMIx")) if key in binary)
        return f"{binary['spec']} of env {binary['env']} (lock sha256 {binary['lock_sha256'][:12]}{mpi})"
    return binary.get("from", "")


def read_plan(run_dir: Path) -> Plan | None:
    """The run's plan; None for a run that wrote none."""
    path = run_dir / PLAN
    if not path.exists() and not path.is_symlink():
        return None
    return _read(Plan, path, "plan")


def _read(model: type[Record] | type[Plan], path: Path, what: str):
    """A record or plan read bounded (a regular file, not a symlink, at most MAX_INPUT bytes) and checked
    by its schema; RecordError naming the file and the first key that is wrong."""
    try:
        return model.model_validate_json(read_bounded(path, follow_symlinks=False))
    except CommstackError as e:
        raise RecordError(str(e)) from None
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        raise RecordError(f"{path}: not a commstack {what} ({msg}{' at ' + where if where else ''}); "
                          "truncated, damaged or written by something else") from None


def read_run(run_dir: Path) -> list[Record]:
    """Every record of a results directory, in suite and step order; a planned step that left none
    is not-run (LOST)."""
    try:
        os.close(results_dir(run_dir))  # ours, under parents nobody else can change: nothing swapped while read
    except UnsafePathError as e:
        raise RecordError(str(e)) from None
    records = {r.key: r for r in (Record.read(p) for p in sorted(run_dir.glob(f"steps/*/{RECORD}")))}
    plan = read_plan(run_dir)
    for planned in plan.steps if plan else []:
        records.setdefault(planned.key, planned.model_copy(update={"verdict": "not-run", "reason": LOST}))
    if not records:
        raise RecordError(f"{run_dir}: no step records (steps/*/{RECORD})")
    return sorted(records.values(), key=lambda r: (r.index, r.suite, r.step))
