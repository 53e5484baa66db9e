"""A step's key figure as the view's line shows it: the judged metric at one size, and its share of the reference."""

from __future__ import annotations

from commstack.benchmarks import shown
from commstack.errors import CommstackError
from commstack.results.diagnosis import headline, size_text
from commstack.results.judge import References
from commstack.results.records import Record


def number(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def duration(s: float) -> str:
    return f"{s:.1f} s" if s < 60 else f"{int(s // 60)} min {s % 60:02.0f} s"


def key_figure(record: Record, refs: References | None) -> dict | None:
    """The figure a step's line shows: the median of the judged metric at the largest size for a rate,
    the smallest for a time, among the sizes its reference holds where it has one; and its share of
    that reference."""
    medians = record.medians()
    if record.verdict == "not-run" or not medians:
        return None
    try:
        ref = refs.find(record.benchmark, record.tags) if refs else None
    except CommstackError:  # the judge met the same error: the step's reason says it
        ref = None
    size = headline(record, [s for s in medians if ref and s in ref.points] or medians)
    value = medians[size][0]
    _, unit, factor = shown(record.metric)
    share = value / ref.points[size] if ref and ref.points.get(size) else None
    return {"benchmark": record.benchmark, "size": size, "value": value * factor, "unit": unit or record.unit,
            "of_reference": share}


def figure_text(f: dict) -> str:
    share = f", {f['of_reference']:.0%} of reference".replace("%", " %") if f["of_reference"] is not None else ""
    return f"{f['benchmark']} {size_text(f['size'])}: {number(f['value'])} {f['unit']}{share}"
