"""The lowest layer at fault: where a step of an upper layer (MPI, NCCL) is short of its yardstick (its reference
in a report, run A in `compare`) or failed, the steps of the layers below it on the same nodes say which layer
lacks what; the rules: docs/harness.md#the-lowest-layer-at-fault.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from commstack import benchmarks
from commstack.benchmarks import METRICS
from commstack.results.records import Record
from commstack.tools import TOOLS
from commstack.tools.base import LAYERS

#: the layers each layer runs over, bottom up: MPI over UCX over the fabric, NCCL over the fabric through its
#: net plugin
BELOW = {"fabric": (), "ucx": ("fabric",), "mpi": ("fabric", "ucx"), "nccl": ("fabric",)}
assert set(BELOW) == set(LAYERS) and all(LAYERS.index(b) < LAYERS.index(a) for a in BELOW for b in BELOW[a])
NAMES = {"fabric": "the fabric", "ucx": "UCX", "mpi": "MPI", "nccl": "NCCL"}
#: where to look when a layer is short and every layer below it carries the load
LOOK = {"ucx": "look at UCX's transports and devices (UCX_TLS, UCX_NET_DEVICES, ucx_info -d)",
        "mpi": "look at MPI's transport (UCX_TLS, OMPI_MCA_pml)",
        "nccl": "look at NCCL's net plugin (NCCL_NET, aws-ofi-nccl, FI_PROVIDER)"}
#: a unit's quantity and its factor to the SI unit; how a quantity is shown
UNITS = {"MB/s": ("bandwidth", 1e6), "GB/s": ("bandwidth", 1e9), "GiB/s": ("bandwidth", 2 ** 30),
         "s": ("time", 1.0), "ms": ("time", 1e-3), "us": ("time", 1e-6)}
SHOWN = {"bandwidth": ("GB/s", 1e9), "time": ("µs", 1e-6)}
#: the changes of `compare` that hold a size to its baseline (not missing on a side, not invalid)
HELD = ("same", "better", "regression")


def layer_of(record: Record) -> str | None:
    """The layer its tool measures; None for a tool this commstack does not know."""
    tool = TOOLS.get(record.tool)
    return tool.layer if tool else None


@dataclass
class Yardstick:
    """A step held to what it should reach at the sizes `held`: those where it is worse than allowed, each
    (median, expected) in the step's unit, or the failure of a step that did not finish."""

    of: str                                   # what `expected` is: "the reference", "A"
    tolerance: float = 0.0                    # the relative change allowed on the bad side, e.g. 0.10
    held: frozenset[int] = frozenset()        # the sizes it is held to
    points: dict[int, tuple[float, float]] = field(default_factory=dict)
    failed: str = ""                          # "failed (crashed)": the step ended without reaching it


@dataclass(frozen=True)
class Finding:
    step: str                 # suite/step of the upper step
    nodes: tuple[str, ...]
    message: str              # its figures, the lower layers' on its nodes, and the lowest layer at fault


def headline(record: Record, sizes: Iterable[int] | None = None) -> int | None:
    """The size a reader looks at first, of `sizes` (default: the record's): the largest of a rate, the smallest of
    a time (a sweep's small sizes of a rate, and large ones of a time, say more about the host than the link)."""
    sizes = record.medians() if sizes is None else sizes
    return (max if METRICS[record.metric].higher_is_better else min)(sizes, default=None)


def quantity(record: Record) -> str | None:
    return UNITS.get(record.unit, (None,))[0]


def si(record: Record, value: float) -> float:
    """`value` in the record's unit as B/s or s."""
    return value * UNITS[record.unit][1]


def directions(record: Record) -> int:
    """How many directions its figure counts: a bidirectional bandwidth both (the NICs' line rate it may use)."""
    return benchmarks.get(record.benchmark).line_rate_factor or 1 if quantity(record) == "bandwidth" else 1


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


def against_references(records: Iterable[Record], refs) -> dict[tuple[str, str], Yardstick]:
    """Every step that ran held to its reference: the reference points it misses beyond the reference's
    tolerance; a failed step, with or without a reference, failed."""
    out = {}
    for r in records:
        ref = refs.find(r.benchmark, r.tags) if refs and r.verdict != "not-run" else None
        if ref is not None and ref.metric == r.metric:
            higher, medians = METRICS[r.metric].higher_is_better, r.medians()
            held = frozenset(ref.points) & set(medians)
            short = [s for s in held if _worse(higher, medians[s][0], ref.points[s], -ref.lower)]
            points = {s: (medians[s][0], ref.points[s]) for s in short}
            out[r.key] = Yardstick("the reference", -ref.lower, held, points)
        if r.verdict == "fail" and not (r.key in out and out[r.key].points):
            out[r.key] = Yardstick("the reference", failed=_failed(r))
    return out


def against_baseline(a: Iterable[Record], b: Iterable[Record], changes,
                     tolerance_of: Callable[[Record], float]) -> dict[tuple[str, str], Yardstick]:
    """Every step of run B held to baseline A at the sizes both have: those `compare` calls regressions; a step
    that fails in B but not in A, without such sizes, failed."""
    failed_in_a = {r.key for r in a if r.verdict == "fail"}
    out = {}
    for r in b:
        mine = [c for c in changes if c.step == f"{r.suite}/{r.step}" and c.change in HELD]
        points = {c.size: (c.b, c.a) for c in mine if c.change == "regression"}
        failed = _failed(r) if r.verdict == "fail" and r.key not in failed_in_a and not points else ""
        out[r.key] = Yardstick("A", tolerance_of(r), frozenset(c.size for c in mine), points, failed)
    return out


def diagnose(records: list[Record], yardsticks: dict[tuple[str, str], Yardstick]) -> list[Finding]:
    """A finding for every upper step short between nodes, with a lower layer's step on the same nodes, in step
    order."""
    findings = []
    for r in records:
        short, layer = yardsticks.get(r.key), layer_of(r)
        # between nodes only: within one node MPI and NCCL move data through memory, not the fabric
        if not (short and (short.points or short.failed)) or not BELOW.get(layer) or len(set(r.nodelist)) < 2 \
                or quantity(r) is None:
            continue
        lowers = [(below, low) for below in BELOW[layer] if (low := _lower(records, r, below)) is not None]
        if lowers:
            findings.append(_finding(r, short, lowers, yardsticks))
    return findings


def _lower(records: list[Record], upper: Record, layer: str) -> Record | None:
    """The step of `layer` that ran on the upper step's nodes and measures the same quantity: one with the
    same memory first, then the first in the run."""
    nodes = set(upper.nodelist)
    hits = [r for r in records if layer_of(r) == layer and set(r.nodelist) == nodes and r.verdict != "not-run"
            and quantity(r) == quantity(upper)]
    return min(hits, key=lambda r: (r.tags.get("memory", "host") != upper.tags.get("memory", "host"), r.index),
               default=None)


def _finding(upper: Record, short: Yardstick, lowers: list[tuple[str, Record]],
             yardsticks: dict[tuple[str, str], Yardstick]) -> Finding:
    kind = quantity(upper)
    higher = METRICS[upper.metric].higher_is_better
    size = headline(upper, short.points)  # None: a failed step
    if size is None:
        head, expected = f"{upper.benchmark} {short.failed}", None
    else:
        value, e = short.points[size]
        expected = si(upper, e) / directions(upper)  # what one direction of the layer below must carry
        both = " both ways" if directions(upper) > 1 else ""
        head = (f"{upper.benchmark} reaches {shown(kind, si(upper, value))}{both} at {size_text(size)} "
                f"({value / e:.0%} of {short.of}".replace("%", " %") + f", {shown(kind, si(upper, e))})")
    said = [_lower_said(low, yardsticks.get(low.key), size, expected, short.tolerance, higher, first=i == 0)
            for i, (_, low) in enumerate(lowers)]  # bottom up
    k = next((i for i, (_, is_short) in enumerate(said) if is_short), len(said))  # the lowest layer short
    fault = lowers[k][0] if k < len(lowers) else None
    fine = [below for below, _ in lowers[:k]]
    where = "; ".join(text for text, _ in said)
    ok = " and ".join(NAMES[f] for f in fine)
    ok = f"{ok} {'is' if len(fine) == 1 else 'are'} fine; " if fine else ""
    at = fault or layer_of(upper)  # the fabric, the lowest, is never the upper step's own layer
    verdict = NAMES[at] if at == "fabric" else ok + (f"{NAMES[at]}: {LOOK[at]}" if fault else LOOK[at])
    return Finding(f"{upper.suite}/{upper.step}", tuple(upper.nodelist), f"{head}; {where}: {verdict}")


def _lower_said(low: Record, own: Yardstick | None, size: int | None, expected: float | None, tolerance: float,
                higher: bool, first: bool) -> tuple[str, bool]:
    """What the lower step reached near `size`, and whether its layer is short there."""
    name = f"{low.benchmark} on the same nodes" if first else low.benchmark
    if low.verdict == "fail":
        return f"{name} {_failed(low)}", True
    medians = low.medians()
    if not medians:
        return f"{name} left no figures", True
    # the upper step failed: the lower one's headline size; else the same size, else the nearest power of two
    # (the larger of two)
    size_low = headline(low) if size is None else min(
        medians, key=lambda s: (abs(s.bit_length() - size.bit_length()), abs(s - size), -s))
    value = medians[size_low][0]
    at = "" if size_low == size else f" at {size_text(size_low)}"
    text = f"{name} reaches {shown(quantity(low), si(low, value))}{at}"
    if own and size_low in own.held:  # its own yardstick decides
        if size_low not in own.points:
            return text, False
        v, e = own.points[size_low]
        of = "its reference" if own.of == "the reference" else own.of
        return text + f" ({v / e:.0%} of {of})".replace("%", " %"), True
    return text, expected is not None and _worse(higher, si(low, value) / directions(low), expected, tolerance)


def by_layer(records: Iterable[Record]) -> list[tuple[tuple[str, ...], list[tuple[str, Record, str]]]]:
    """The steps between nodes, per node list, bottom up by layer, each with its headline figure (the largest
    size of a rate, the smallest of a time): what the report shows before the diagnosis is read."""
    groups: dict[tuple[str, ...], list[Record]] = {}
    for r in records:
        if len(r.nodelist) > 1 and layer_of(r):
            groups.setdefault(tuple(r.nodelist), []).append(r)
    out = []
    for nodes, rs in groups.items():
        rows = []
        for r in sorted(rs, key=lambda r: LAYERS.index(layer_of(r))):
            size, kind = headline(r), quantity(r)
            at = f"{shown(kind, si(r, r.medians()[size][0]))} at {size_text(size)}" if size is not None and kind else ""
            rows.append((NAMES[layer_of(r)], r, at))
        out.append((nodes, rows))
    return out
