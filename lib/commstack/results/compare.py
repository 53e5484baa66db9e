"""Compare run B against baseline run A, per step and per message size; the rules:
docs/harness.md#suites-reports-and-compare.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from commstack.errors import CommstackError
from commstack.benchmarks import METRICS, shown_value, shown
from commstack.results.diagnosis import Finding, against_baseline, diagnose
from commstack.results.judge import VERDICTS
from commstack.results.references import References
from commstack.results.records import Record, read_run

NOT_RUN = "not run in A nor B"


class CompareError(CommstackError):
    """Runs that cannot be compared: different systems, different metrics for one step."""


@dataclass
class Change:
    step: str
    size: int | None          # None: the whole step
    a: float | None
    b: float | None
    change: str               # same | better | regression | missing in A | missing in B | invalid | worse verdict
    #                           | not run in A nor B
    detail: str = ""          # B's verdict and reason, where that is the news
    metric: str = ""          # what a and b measure, in its recorded unit (the table shows the report's)

    @property
    def ratio(self) -> float | None:
        return self.b / self.a if self.a and self.b is not None else None

    @property
    def difference(self) -> bool:
        return self.change not in ("same", "better", NOT_RUN)


def compare(a_dir: Path, b_dir: Path, tolerance: float | None = None,
            refs: References | None = None) -> list[Change]:
    a, b = read_run(a_dir), read_run(b_dir)
    sa, sb = {r.system for r in a}, {r.system for r in b}
    if sa != sb:
        raise CompareError(f"cannot compare results of different systems: {sorted(sa)} vs {sorted(sb)}")
    base = {r.key: r for r in a}
    new = {r.key: r for r in b}
    out: list[Change] = []
    for key in sorted(set(base) | set(new)):
        name = f"{key[0]}/{key[1]}"
        ra, rb = base.get(key), new.get(key)
        if ra is None or rb is None:
            out.append(Change(name, None, None, None, f"missing in {'A' if ra is None else 'B'}"))
            continue
        if not ra.repeats and not rb.repeats:  # no rows on either side: only the verdicts compare
            worse = VERDICTS.index(rb.verdict) > VERDICTS.index(ra.verdict)
            out.append(Change(name, None, None, None, "worse verdict" if worse else NOT_RUN if rb.verdict == "not-run"
                              else "same", _said(rb, "B")))
            continue
        if not ra.repeats or not rb.repeats:
            side, other = ("A", ra) if not ra.repeats else ("B", rb)
            out.append(Change(name, None, None, None, f"missing in {side}", _said(other, side)))
            continue
        if (ra.metric, ra.unit) != (rb.metric, rb.unit):
            raise CompareError(f"{name}: A measures {ra.metric} in {ra.unit}, B {rb.metric} in {rb.unit}")
        out += _sizes(name, ra, rb, _tolerance(rb, tolerance, refs))
        if VERDICTS.index(rb.verdict) > VERDICTS.index(ra.verdict):
            out.append(Change(name, None, None, None, "worse verdict",
                              f"verdict {ra.verdict} -> {rb.verdict}" + (f": {rb.reason}" if rb.reason else "")))
    return out


def diagnosis(a_dir: Path, b_dir: Path, changes: list[Change], tolerance: float | None = None,
              refs: References | None = None) -> list[Finding]:
    """The lowest layer at fault for every step of B that regressed or failed, where a lower layer ran on its
    nodes in B (results.diagnosis)."""
    b = read_run(b_dir)
    return diagnose(b, against_baseline(read_run(a_dir), b, changes, lambda r: _tolerance(r, tolerance, refs)))


def _said(r: Record, side: str) -> str:
    """What a side's record says of a step it has no rows for."""
    kind = f" ({r.error_kind})" if r.error_kind else ""
    return f"{side}: {r.verdict}{kind}" + (f": {r.reason}" if r.reason else "")


def _tolerance(r: Record, given: float | None, refs: References | None) -> float:
    if given is not None:
        return given
    ref = refs.find(r.benchmark, r.tags) if refs else None
    return -ref.lower if ref else 0.05


def _sizes(name: str, ra: Record, rb: Record, tolerance: float) -> list[Change]:
    ma, mb = ra.medians(), rb.medians()
    higher = METRICS[rb.metric].higher_is_better
    out = []
    for size in sorted(set(ma) | set(mb)):
        if size not in ma or size not in mb:
            out.append(Change(name, size, ma.get(size, (None,))[0], mb.get(size, (None,))[0],
                              f"missing in {'A' if size not in ma else 'B'}", metric=rb.metric))
            continue
        (va, da, _), (vb, db, _) = ma[size], mb[size]
        if not all(math.isfinite(v) and v > 0 for v in (va, vb)):
            out.append(Change(name, size, va, vb, "invalid", metric=rb.metric))
            continue
        ratio = vb / va
        change = (ratio - 1) if higher else (1 / ratio - 1)
        threshold = max(tolerance, 2 * max(da / va, db / vb))  # the noise: twice the larger relative repeat spread
        kind = "regression" if change < -threshold else "better" if change > threshold else "same"
        out.append(Change(name, size, va, vb, kind, metric=rb.metric))
    return out


def compare_table(changes: list[Change], findings: list[Finding] = ()) -> str:
    """The table of changes in the units the report shows (GB/s, us), its counts, then the lowest layer at
    fault of each step that got worse."""
    def num(v: float | None, factor: float) -> str:
        return "-" if v is None else shown_value(v * factor)
    lines = [f"{'step':48s} {'size':>10s} {'A':>12s} {'B':>12s} {'unit':6s} {'B/A':>7s}  change"]
    for c in changes:
        _, unit, factor = shown(c.metric) if c.metric else ("", "", 1.0)
        lines.append(f"{c.step:48s} {c.size if c.size is not None else 'all':>10} {num(c.a, factor):>12s} "
                     f"{num(c.b, factor):>12s} {unit:6s} {format(c.ratio, '.3f') if c.ratio else '-':>7s}  {c.change}"
                     + (f" - {c.detail}" if c.detail and c.change != NOT_RUN else ""))
    n = sum(c.difference for c in changes)
    not_run = sum(c.change == NOT_RUN for c in changes)
    lines.append(f"{len(changes)} points, {sum(c.change == 'regression' for c in changes)} regressions, "
                 f"{n} differences" + (f", {not_run} step{'s' * (not_run > 1)} {NOT_RUN}" if not_run else ""))
    if findings:
        lines += ["lowest layer at fault:", *(f"  {f.step} on {', '.join(f.nodes)}: {f.message}" for f in findings)]
    return "\n".join(lines) + "\n"
