"""The lowest layer at fault. Where a step of an upper layer (MPI, NCCL) is short of what it should reach, or
failed, and a step of a layer below it (the fabric: fi_pingpong; UCX: ucx_perftest) ran on the same nodes in
the same run, the lower step's figure says whether that layer carries what the upper one lacks:

    osu_bw reaches 11.9 GB/s at 4 MiB (50 % of the reference); fi_pingpong on the same nodes reaches
    12.1 GB/s: the fabric

A lower step is short where it failed, where its own judgement (its reference, or its baseline in `compare`)
finds it short at that size, or where its figure, in the same quantity, is worse than what the upper step
should reach beyond the upper step's tolerance. The lowest short layer is at fault; with none, the upper
layer itself. Figures are compared in SI units (B/s, s) through the columns' units, per direction
(osu_bibw counts both)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from commstack import benchmarks
from commstack.benchmarks import METRICS
from commstack.results.records import Record

#: the layers, bottom up, and the layers each one runs over: MPI over UCX over the fabric, NCCL over the
#: fabric through its net plugin
BELOW = {"fabric": (), "ucx": ("fabric",), "mpi": ("fabric", "ucx"), "nccl": ("fabric",)}
NAMES = {"fabric": "the fabric", "ucx": "UCX", "mpi": "MPI", "nccl": "NCCL"}
#: where to look when a layer is short and every layer below it carries the load
LOOK = {"ucx": "look at UCX's transports and devices (UCX_TLS, UCX_NET_DEVICES, ucx_info -d)",
        "mpi": "look at MPI's transport (UCX_TLS, OMPI_MCA_pml)",
        "nccl": "look at NCCL's net plugin (NCCL_NET, aws-ofi-nccl, FI_PROVIDER)"}
#: the layer of each tool's steps (until the tool modules say it themselves)
LAYER_OF_TOOL = {"fi_pingpong": "fabric", "ucx_perftest": "ucx", "osu": "mpi", "mpi-pingpong": "mpi",
                 "nccl-tests": "nccl"}
#: a unit's quantity and its factor to the SI unit; how a quantity is shown
UNITS = {"MB/s": ("bandwidth", 1e6), "MiB/s": ("bandwidth", 2 ** 20), "GB/s": ("bandwidth", 1e9),
         "GiB/s": ("bandwidth", 2 ** 30), "s": ("time", 1.0), "ms": ("time", 1e-3), "us": ("time", 1e-6),
         "ns": ("time", 1e-9)}
SHOWN = {"bandwidth": ("GB/s", 1e9), "time": ("µs", 1e-6)}


def layer_of(record: Record) -> str | None:
    return LAYER_OF_TOOL.get(record.tool)


@dataclass
class Shortfall:
    """Where one step falls short: the sizes worse than allowed, each (median, expected) in the step's unit,
    or the failure of a step that did not finish."""

    of: str                                   # what `expected` is: "the reference", "A"
    tolerance: float                          # the relative change allowed on the bad side, e.g. 0.10
    points: dict[int, tuple[float, float]] = field(default_factory=dict)
    failed: str = ""                          # "failed (crashed)": the step ended without its figures

    def headline(self, record: Record) -> int | None:
        """The size a reader looks at first: the largest for a rate, the smallest for a time."""
        if not self.points:
            return None
        return max(self.points) if METRICS[record.metric].higher_is_better else min(self.points)


@dataclass(frozen=True)
class Finding:
    step: str                 # suite/step of the upper step
    nodes: tuple[str, ...]
    layer: str                # the lowest layer at fault
    message: str

    def line(self) -> str:
        return f"{self.step} on {', '.join(self.nodes)}: {self.message}"


def quantity(record: Record) -> str | None:
    return UNITS.get(record.unit, (None,))[0]


def si(record: Record, value: float) -> float:
    """`value` in the record's unit as B/s or s, per direction (a bidirectional bandwidth counts both)."""
    kind, factor = UNITS[record.unit]
    directions = (benchmarks.BENCHMARKS[record.benchmark].line_rate_factor or 1
                  if kind == "bandwidth" and record.benchmark in benchmarks.BENCHMARKS else 1)
    return value * factor / directions


def shown(kind: str, value_si: float) -> str:
    unit, factor = SHOWN[kind]
    v = value_si / factor
    return f"{v:.0f} {unit}" if abs(v) >= 100 else f"{v:#.3g} {unit}"


def size_text(size: int) -> str:
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= n and size % n == 0:
            return f"{size // n} {unit}"
    return f"{size} B"


def _failed(r: Record) -> str:
    return f"failed ({r.error_kind})" if r.error_kind else "failed"


def _worse(higher: bool, value: float, expected: float, tolerance: float) -> bool:
    """`value` worse than `expected` beyond `tolerance` (NaN or 0 are worse than anything)."""
    if not math.isfinite(value) or value <= 0:
        return True
    return value < expected * (1 - tolerance) if higher else value > expected * (1 + tolerance)


def against_references(records: Iterable[Record], refs) -> dict[tuple[str, str], Shortfall]:
    """The shortfalls of a run's steps as its verdicts found them: the reference points a degraded or failed
    step misses beyond the reference's tolerance; a failed step without such points failed."""
    out = {}
    for r in records:
        if r.verdict not in ("degraded", "fail"):
            continue
        ref = refs.find(r.benchmark, r.tags) if refs else None
        higher = METRICS[r.metric].higher_is_better
        medians = r.medians()
        points = {} if ref is None or ref.metric != r.metric else {
            s: (medians[s][0], e) for s, e in ref.points.items()
            if s in medians and _worse(higher, medians[s][0], e, -ref.lower)}
        if points:
            out[r.key] = Shortfall("the reference", -ref.lower, points)
        elif r.verdict == "fail":
            out[r.key] = Shortfall("the reference", -ref.lower if ref else 0.0, failed=_failed(r))
    return out


def against_baseline(a: Iterable[Record], b: Iterable[Record], changes,
                     tolerance_of: Callable[[Record], float]) -> dict[tuple[str, str], Shortfall]:
    """The shortfalls of run B's steps against baseline A: the sizes `compare` calls regressions, and the
    steps that fail in B but not in A."""
    base = {r.key: r for r in a}
    out = {}
    for r in b:
        name = f"{r.suite}/{r.step}"
        points = {c.size: (c.b, c.a) for c in changes if c.step == name and c.change == "regression"}
        if points:
            out[r.key] = Shortfall("A", tolerance_of(r), points)
        elif r.verdict == "fail" and (r.key not in base or base[r.key].verdict != "fail"):
            out[r.key] = Shortfall("A", tolerance_of(r), failed=_failed(r))
    return out


def diagnose(records: list[Record], shortfalls: dict[tuple[str, str], Shortfall]) -> list[Finding]:
    """A finding for every short upper step with a lower layer's step on the same nodes, in step order."""
    findings = []
    for r in records:
        short, layer = shortfalls.get(r.key), layer_of(r)
        if not short or not BELOW.get(layer) or not r.nodelist or quantity(r) is None:
            continue
        lowers = [(below, _lower(records, r, below)) for below in BELOW[layer]]
        lowers = [(below, low) for below, low in lowers if low is not None]
        if lowers:
            findings.append(_finding(r, short, lowers, shortfalls))
    return findings


def _lower(records: list[Record], upper: Record, layer: str) -> Record | None:
    """The step of `layer` that ran on the upper step's nodes and measures the same quantity: one with the
    same memory first, then the first in the run."""
    nodes = set(upper.nodelist)
    hits = [r for r in records if layer_of(r) == layer and set(r.nodelist) == nodes and r.verdict != "not-run"
            and quantity(r) == quantity(upper)]
    hits.sort(key=lambda r: (r.tags.get("memory", "host") != upper.tags.get("memory", "host"), r.index))
    return hits[0] if hits else None


def _finding(upper: Record, short: Shortfall, lowers: list[tuple[str, Record]],
             shortfalls: dict[tuple[str, str], Shortfall]) -> Finding:
    kind = quantity(upper)
    higher = METRICS[upper.metric].higher_is_better
    size = short.headline(upper)
    if size is None:
        head, expected = f"{upper.benchmark} {short.failed}", None
    else:
        value, e = short.points[size]
        expected = si(upper, e)
        head = (f"{upper.benchmark} reaches {shown(kind, si(upper, value))} at {size_text(size)} "
                f"({value / e:.0%} of {short.of}".replace("%", " %") + f", {shown(kind, expected)})")
    said, fine, fault = [], [], None
    for below, low in lowers:  # bottom up
        text, is_short = _lower_said(low, shortfalls.get(low.key), size, expected, short.tolerance, higher)
        said.append(text)
        if is_short and fault is None:
            fault = below
        elif not is_short and fault is None:
            fine.append(below)
    where = "; ".join(said)
    if fault == "fabric":
        verdict = NAMES["fabric"]
    else:
        ok = " and ".join(NAMES[f] for f in fine)
        ok = f"{ok} {'is' if len(fine) == 1 else 'are'} fine; " if fine else ""
        at = fault or layer_of(upper)
        verdict = ok + (f"{NAMES[at]}: {LOOK[at]}" if fault else LOOK[at])
    return Finding(f"{upper.suite}/{upper.step}", tuple(upper.nodelist), fault or layer_of(upper),
                   f"{head}; {where}: {verdict}")


def _lower_said(low: Record, own: Shortfall | None, size: int | None, expected: float | None, tolerance: float,
                higher: bool) -> tuple[str, bool]:
    """What the lower step reached near `size`, and whether its layer is short there."""
    name = f"{low.benchmark} on the same nodes"
    if low.verdict == "fail" and (own is None or own.failed or not low.repeats):
        return f"{name} {_failed(low)}", True
    medians = low.medians()
    if not medians:
        return f"{name} left no figures", True
    if size is None:  # the upper step failed: the lower one's headline size
        size_low = max(medians) if METRICS[low.metric].higher_is_better else min(medians)
    else:  # the same size, else the nearest on a log scale
        size_low = min(medians, key=lambda s: (abs(math.log2(max(s, 1) / max(size, 1))), -s))
    value = medians[size_low][0]
    at = "" if size_low == size else f" at {size_text(size_low)}"
    text = f"{name} reaches {shown(quantity(low), si(low, value))}{at}"
    if own and size_low in own.points:
        v, e = own.points[size_low]
        return text + f" ({v / e:.0%} of {'its reference' if own.of == 'the reference' else own.of})".replace(
            "%", " %"), True
    if own and own.failed:
        return text + f" ({own.failed})", True
    short = expected is not None and _worse(higher, si(low, value), expected, tolerance)
    return text, short


def findings_text(findings: list[Finding]) -> str:
    """The findings as `compare` prints them, after its table."""
    if not findings:
        return ""
    return "lowest layer at fault:\n" + "".join(f"  {f.line()}\n" for f in findings)
