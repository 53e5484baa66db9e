"""Judge parsed sweeps: correctness first, then the median of the repeats against the system's references
(results.references). The verdicts and what each means: docs/harness.md#verdicts-and-exit-statuses.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from commstack.errors import CommstackError
from commstack import benchmarks
from commstack.benchmarks import METRICS
from commstack.tools.lines import Sweep
from commstack.results.parse import failed_checks
from commstack.results.references import UNSTABLE_SPREAD, References

#: a rate of 0 is a printed 0.00 for messages up to this size (seed cscs-nccl-02, without the NCCL
#: plugin: 0.00 GB/s up to 1 KiB); above it, it is no measurement
TINY = 1024
#: every verdict, best first; a step's verdict is the worst of its points and checks
VERDICTS = ("pass", "no-reference", "unstable", "degraded", "fail", "not-run")


def check_correctness(sweep: Sweep) -> list[str]:
    """Every data check the benchmark itself reports failed (results.parse.failed_checks), and a sweep stopped
    early; an empty list means correct."""
    bad = [f"{sweep.benchmark}: {reason}" if reason else quoted.text for reason, quoted in failed_checks(sweep)]
    if sweep.complete is False:
        bad.append(f"{sweep.benchmark}: output ends before the benchmark's end line (sweep stopped early)")
    return bad


@dataclass
class Point:
    size: int
    median: float
    spread: float  # (max - min) / median over the repeats
    reference: float | None = None
    ratio: float | None = None
    status: str = "pass"
    reason: str = ""


@dataclass
class Verdict:
    benchmark: str
    metric: str
    verdict: str          # one of VERDICTS
    reason: str           # the first thing wrong, in one line; "" for pass
    points: list[Point]
    failures: list[str]
    diagnosis: list[str]

    def summary(self) -> str:
        lines = [f"{self.benchmark} [{self.metric}]: {self.verdict}" + (f" - {self.reason}" if self.reason else "")]
        lines += [f"  {p.size} B: {p.status} - {p.reason}" for p in self.points if p.status != "pass"]
        lines += [f"  correctness: {f}" for f in self.failures]
        lines += [f"  diagnosis: {d}" for d in self.diagnosis]
        return "\n".join(lines)


def judge(repeats: list[Sweep], tags: dict[str, Any], refs: References | None, metric: str,
          line_rate_MBps: float | None = None, system: str | None = None) -> Verdict:
    """Correctness of every repeat, then the median of the repeats against the reference; `system`
    (whose references `refs` are, None where it has none) names it in the reason."""
    if not repeats:
        raise CommstackError("nothing to judge: no result")
    bench = repeats[0].benchmark
    failures = [f for s in repeats for f in check_correctness(s)]
    higher = METRICS[metric].higher_is_better
    ref = refs.find(bench, tags) if refs else None
    for s in repeats:
        # a time must be > 0; a rate may print 0.00 where the message is tiny (at a size the reference
        # holds, the point says more: no data moved)
        bad = [r["size"] for r in s.rows if not math.isfinite(r[metric]) or r[metric] < 0
               or (r[metric] == 0 and (not higher or r["size"] > TINY) and not (ref and r["size"] in ref.points))]
        if bad:
            failures.append(f"{bench}: {metric} is {s.row(bad[0])[metric]!r} at {bad[0]} B: not a measurement")
        if not s.rows:
            failures.append(f"{bench}: no data rows")
        elif all(r[metric] == 0 for r in s.rows):
            failures.append(f"{bench}: {metric} is 0 at every size: no data moved")
    points, diagnosis = [], []
    sizes = sorted({size for s in repeats for size in s.sizes})
    for size in sizes:
        values = [s.row(size)[metric] for s in repeats if size in s.sizes]
        med = statistics.median(values)
        spread = (max(values) - min(values)) / med if med > 0 else 0.0
        p = Point(size, med, spread)
        limit_factor = benchmarks.get(bench).line_rate_factor
        if len(values) < len(repeats):
            p.status, p.reason = "fail", f"{len(repeats) - len(values)} of {len(repeats)} repeats lack this size"
        elif line_rate_MBps and limit_factor and metric == "bandwidth_MBps" and tags.get("nodes", 1) >= 2 \
                and med > line_rate_MBps * limit_factor:
            p.status = "fail"
            p.reason = (f"{med:.1f} MB/s is above the physical limit {line_rate_MBps * limit_factor:.0f} MB/s "
                        f"(NIC line rate x{limit_factor}): the measurement is wrong")
        elif ref and size in ref.points and not med > 0:
            p.status = "fail"
            p.reason = (f"{metric} is {med:g} where reference {ref.id} holds {ref.points[size]:g} {ref.unit}: "
                        f"no data moved")
        elif ref and size in ref.points:
            p.reference = ref.points[size]
            p.ratio = med / p.reference
            change = (p.ratio - 1.0) if higher else (1.0 / p.ratio - 1.0)
            if change < ref.lower:
                p.status = "degraded"
                p.reason = f"{med:g} {ref.unit} vs reference {p.reference:g} ({change:+.1%}, allowed {ref.lower:+.0%})"
            elif change > ref.upper:
                p.status = "unstable"
                p.reason = f"{med:g} {ref.unit} is better than reference {p.reference:g} by {change:+.1%}: " \
                           f"check the run (cached buffers, wrong placement)"
        if p.status == "pass" and len(values) >= 3 and spread > (refs.unstable_spread if refs else UNSTABLE_SPREAD):
            p.status = "unstable"
            p.reason = f"repeats spread {spread:.1%} around median {med:g}"
        if refs:
            diagnosis += [f"{size} B at {med:g}: {d.message}" for d in refs.diagnoses
                          if d.metric == metric and d.applies(bench, tags, size, med)]
        points.append(p)
    if ref:
        missing = sorted(set(ref.points) - set(sizes))
        if missing:
            failures.append(f"{bench}: no result at {', '.join(map(str, missing))} B, which reference "
                            f"{ref.id} holds it to (sweep cut short?)")
    status = max((p.status for p in points), key=VERDICTS.index, default="pass")
    reason = next((f"{p.size} B: {p.reason}" for p in points if p.status == status and p.reason), "")
    if failures:
        status, reason = "fail", failures[0]
    elif refs and not ref and status == "pass":
        named = ", ".join(f"{k}={v}" for k, v in sorted(tags.items()) if k not in ("suite", "benchmark"))
        status, reason = "no-reference", f"{refs.system} has no reference for {bench} {named}"
    elif not refs and status == "pass":
        reason = f"correctness only: system {system} has no references"
    return Verdict(bench, metric, status, reason, points, failures, diagnosis)
