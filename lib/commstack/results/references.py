"""A system's references: systems/references/<system>.yaml (schema: References, on config's types), read
once per process; each entry's recorded output is parsed by the same parser as a live run.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from commstack.benchmarks import METRICS
from commstack.config import BenchmarkName, Line, MessageSize, MetricName, SafeName, Strict, System, load
from commstack.errors import CommstackError, ConfigError
from commstack.files import MAX_OUTPUT, read_bounded
from commstack.results.parse import parse_tables


#: repeats spreading more than this around their median are "unstable": a references file's default, and the
#: judge's where a system has no references
UNSTABLE_SPREAD = 0.10


class Tolerance(Strict):
    lower: float = -0.10    # allowed relative change on the bad side
    upper: float = 0.10     # better than this is suspicious


class Reference(Strict):
    id: Line
    benchmark: BenchmarkName
    tags: dict[Line, Line | int | bool] = {}
    metric: MetricName
    recorded: Path | None = None        # a recorded real output, relative to the references file
    sizes: list[MessageSize] | None = None      # with recorded: the sizes held to it (default: all)
    points: dict[MessageSize, float] | None = None      # loaded: read from `recorded` where that is given
    tolerance: dict[Literal["lower", "upper"], float] = {}  # loaded: both, the file's where the entry gives none

    @model_validator(mode="after")
    def _one_source(self) -> "Reference":
        if (self.recorded is None) == (self.points is None):
            raise ValueError("give exactly one of `recorded` (a recorded output) and `points` (size: value)")
        return self

    @property
    def unit(self) -> str:
        return METRICS[self.metric].unit

    @property
    def lower(self) -> float:
        return self.tolerance["lower"]

    @property
    def upper(self) -> float:
        return self.tolerance["upper"]

    def matches(self, benchmark: str, tags: dict[str, Any]) -> bool:
        return self.benchmark == benchmark and all(tags.get(k) == v for k, v in self.tags.items())


class Diagnosis(Strict):
    benchmark: BenchmarkName
    metric: MetricName
    size: MessageSize
    tags: dict[Line, Line | int | bool] = {}
    recorded: Path | None = None
    value: float | None = None          # the expected bad figure; loaded, read from `recorded` where that is given
    within: Annotated[float, Field(gt=0)]
    message: Line

    @model_validator(mode="after")
    def _one_source(self) -> "Diagnosis":
        if (self.recorded is None) == (self.value is None):
            raise ValueError("give exactly one of `recorded` and `value`")
        return self

    def applies(self, benchmark: str, tags: dict[str, Any], size: int, value: float) -> bool:
        return (benchmark == self.benchmark and size == self.size
                and all(tags.get(k) == v for k, v in self.tags.items())
                and abs(value - self.value) <= self.within * self.value)


class References(Strict):
    system: SafeName
    tolerance: Tolerance = Tolerance()
    unstable_spread: Annotated[float, Field(gt=0)] = UNSTABLE_SPREAD
    references: list[Reference]
    diagnoses: list[Diagnosis] = []

    def find(self, benchmark: str, tags: dict[str, Any]) -> Reference | None:
        hits = [r for r in self.references if r.matches(benchmark, tags)]
        if len(hits) > 1:
            raise ConfigError(f"{self.system}: references {[r.id for r in hits]} all match {benchmark} {tags}")
        return hits[0] if hits else None


def load_references(path: Path) -> References:
    spec = load(References, path)
    refs = []
    for i, entry in enumerate(spec.references):
        where = f"{path}: references.{i} ({entry.id})"
        points = _recorded(path, entry.recorded, where, entry.metric, entry.sizes) if entry.recorded else entry.points
        tolerance = {**spec.tolerance.model_dump(), **entry.tolerance}
        refs.append(entry.model_copy(update={"points": points, "tolerance": tolerance}))
    diags = [d.model_copy(update={"value": _recorded(path, d.recorded, f"{path}: diagnoses.{i}", d.metric,
                                                     [d.size])[d.size]}) if d.recorded else d
             for i, d in enumerate(spec.diagnoses)]
    return spec.model_copy(update={"references": refs, "diagnoses": diags})


@functools.lru_cache(maxsize=16)
def _references(path: Path, _mtime: int) -> References:
    return load_references(path)


def references_of(system: System) -> References | None:
    """The system's references, read once per process; None for a correctness-only system."""
    if system.references is None:
        return None
    try:
        return _references(system.references, system.references.stat().st_mtime_ns)
    except OSError as e:
        raise ConfigError(f"{system.path}: references {system.references}: {e.strerror}") from None
    except ConfigError as e:  # the references file itself: not a regular file, too large, or malformed
        raise ConfigError(f"{system.path}: references: {e}") from None


def _recorded(refs: Path, name: Path, where: str, metric: str, sizes: list[int] | None) -> dict[int, float]:
    """`metric` at `sizes` (default: every size) in the recorded output `name` beside the references file."""
    try:
        sweep = parse_tables(read_bounded((refs.parent / name).resolve(), MAX_OUTPUT).decode(errors="replace"))[0]
    except CommstackError as e:  # read_bounded names an unreadable file too
        raise ConfigError(f"{where}: recorded output {name}: {e}") from None
    try:
        return {s: float(sweep.row(s)[metric]) for s in sizes or sweep.sizes}
    except KeyError as e:
        raise ConfigError(f"{where}: {name} has {e.args[0]}") from None
