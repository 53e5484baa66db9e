"""Judge parsed sweeps: correctness first, then performance against per-system references.

References are YAML (systems/references/<system>.yaml). Each one points at a recorded real output
and the sizes to hold it to, so the seed tables exist once, as recorded, and are parsed by the
same parser as a live run.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from commstack.errors import CommstackError, ConfigError
from commstack import benchmarks
from commstack.benchmarks import METRICS
from commstack.results.parse import Sweep, parse_tables

SEVERITY = ["pass", "unstable", "degraded", "error"]


def check_correctness(sweep: Sweep) -> list[str]:
    """Every data check the benchmark itself reports; an empty list means correct."""
    bad = list(sweep.errors)
    for r in sweep.rows:
        if r.get("validation") == "Fail" or r.get("check") == "Fail":
            bad.append(f"{sweep.benchmark}: data validation failed at {r['size']} B")
        for col in ("oop_wrong", "ip_wrong"):
            if r.get(col):
                bad.append(f"{sweep.benchmark}: {r[col]} wrong elements ({col}) at {r['size']} B")
    if sweep.meta.get("out_of_bounds_ok") is False:
        bad.append(f"{sweep.benchmark}: {sweep.meta['out_of_bounds']} out-of-bounds values")
    if sweep.complete is False:
        bad.append(f"{sweep.benchmark}: output ends before the benchmark's end line (sweep stopped early)")
    return bad


def load_recorded(path: Path) -> Sweep:
    return parse_tables(path.read_text())[0]


@dataclass
class Reference:
    id: str
    benchmark: str
    tags: dict[str, Any]
    metric: str
    points: dict[int, float]
    lower: float  # allowed relative change on the bad side, e.g. -0.10
    upper: float  # allowed relative change on the good side before it is suspicious
    source: str

    @property
    def unit(self) -> str:
        return METRICS[self.metric].unit

    def matches(self, benchmark: str, tags: dict[str, Any]) -> bool:
        return self.benchmark == benchmark and all(tags.get(k) == v for k, v in self.tags.items())


@dataclass
class Diagnosis:
    benchmark: str
    metric: str
    size: int
    expected_bad: float
    within: float
    message: str
    tags: dict[str, Any] = field(default_factory=dict)

    def applies(self, benchmark: str, tags: dict[str, Any], size: int, value: float) -> bool:
        return (benchmark == self.benchmark and size == self.size
                and all(tags.get(k) == v for k, v in self.tags.items())
                and abs(value - self.expected_bad) <= self.within * self.expected_bad)


@dataclass
class References:
    system: str
    refs: list[Reference]
    diagnoses: list[Diagnosis]
    unstable_spread: float = 0.10

    def find(self, benchmark: str, tags: dict[str, Any]) -> Reference | None:
        hits = [r for r in self.refs if r.matches(benchmark, tags)]
        if len(hits) > 1:
            raise ConfigError(f"{self.system}: references {[r.id for r in hits]} all match {benchmark} {tags}")
        return hits[0] if hits else None


def load_references(path: Path) -> References:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"reference file {path}: {e}") from None
    if not isinstance(data, dict) or "references" not in data:
        raise ConfigError(f"reference file {path}: needs a 'references' list")
    tol = data.get("tolerance", {"lower": -0.10, "upper": 0.10})
    refs = []
    for i, entry in enumerate(data["references"]):
        where = f"reference file {path}, entry {i} ({entry.get('id', '?')})"
        try:
            metric = entry["metric"]
            if metric not in METRICS:
                raise ConfigError(f"{where}: unknown metric {metric!r}; known: {sorted(METRICS)}")
            if "recorded" in entry:
                sweep = load_recorded((path.parent / entry["recorded"]).resolve())
                sizes = entry.get("sizes") or sweep.sizes
                points = {int(s): float(sweep.row(int(s))[metric]) for s in sizes}
                source = entry["recorded"]
            else:
                points = {int(k): float(v) for k, v in entry["points"].items()}
                source = "points"
            t = {**tol, **entry.get("tolerance", {})}
            refs.append(Reference(entry["id"], entry["benchmark"], dict(entry.get("tags", {})), metric, points,
                                  float(t["lower"]), float(t["upper"]), source))
        except (KeyError, TypeError, ValueError, OSError) as e:
            raise ConfigError(f"{where}: {type(e).__name__}: {e}") from None
        except CommstackError as e:
            raise ConfigError(f"{where}: {e}") from None
    diags = []
    for i, d in enumerate(data.get("diagnoses", [])):
        try:
            if "recorded" in d:
                bad = load_recorded((path.parent / d["recorded"]).resolve()).row(int(d["size"]))[d["metric"]]
            else:
                bad = d["value"]
            diags.append(Diagnosis(d["benchmark"], d["metric"], int(d["size"]), float(bad), float(d["within"]),
                                   d["message"], dict(d.get("tags", {}))))
        except (KeyError, TypeError, ValueError, OSError, CommstackError) as e:
            raise ConfigError(f"reference file {path}, diagnosis {i}: {e}") from None
    return References(data.get("system", path.stem), refs, diags, float(data.get("unstable_spread", 0.10)))


@dataclass
class Point:
    size: int
    values: list[float]
    median: float
    spread: float  # (max - min) / median over the repeats
    reference: float | None
    ratio: float | None
    status: str
    reason: str = ""


@dataclass
class Verdict:
    benchmark: str
    metric: str
    unit: str
    status: str
    points: list[Point]
    failures: list[str]
    diagnosis: list[str]

    def summary(self) -> str:
        lines = [f"{self.benchmark} [{self.metric}]: {self.status}"]
        lines += [f"  {p.size} B: {p.status} — {p.reason}" for p in self.points if p.status != "pass"]
        lines += [f"  correctness: {f}" for f in self.failures]
        lines += [f"  diagnosis: {d}" for d in self.diagnosis]
        return "\n".join(lines)


def judge(repeats: list[Sweep], tags: dict[str, Any], refs: References | None, metric: str,
          line_rate_MBps: float | None = None) -> Verdict:
    """Correctness of every repeat, then the median of the repeats against the reference."""
    if not repeats:
        raise CommstackError("nothing to judge: no result")
    bench = repeats[0].benchmark
    failures = [f for s in repeats for f in check_correctness(s)]
    ref = refs.find(bench, tags) if refs else None
    higher = METRICS[metric].higher_is_better
    points, diagnosis = [], []
    for size in repeats[0].sizes:
        values = [s.row(size)[metric] for s in repeats if size in s.sizes]
        med = statistics.median(values)
        spread = (max(values) - min(values)) / med if med else 0.0
        p = Point(size, values, med, spread, None, None, "pass")
        limit_factor = benchmarks.get(bench).line_rate_factor
        if line_rate_MBps and limit_factor and metric == "bandwidth_MBps" and tags.get("nodes", 1) >= 2 \
                and med > line_rate_MBps * limit_factor:
            p.status = "error"
            p.reason = (f"{med:.1f} MB/s is above the physical limit {line_rate_MBps * limit_factor:.0f} MB/s "
                        f"(NIC line rate x{limit_factor}): the measurement is wrong")
        elif ref and size in ref.points:
            p.reference = ref.points[size]
            p.ratio = med / p.reference if p.reference else None
            change = (p.ratio - 1.0) if higher else (1.0 / p.ratio - 1.0) if p.ratio else 0.0
            if change < ref.lower:
                p.status = "degraded"
                p.reason = f"{med:g} {ref.unit} vs reference {p.reference:g} ({change:+.1%}, allowed {ref.lower:+.0%})"
            elif change > ref.upper:
                p.status = "unstable"
                p.reason = f"{med:g} {ref.unit} is better than reference {p.reference:g} by {change:+.1%}: " \
                           f"check the run (cached buffers, wrong placement)"
        if p.status == "pass" and len(values) >= 3 and spread > (refs.unstable_spread if refs else 0.10):
            p.status = "unstable"
            p.reason = f"repeats spread {spread:.1%} around median {med:g}"
        if refs:
            diagnosis += [f"{size} B at {med:g}: {d.message}" for d in refs.diagnoses
                          if d.metric == metric and d.applies(bench, tags, size, med)]
        points.append(p)
    status = max((p.status for p in points), key=SEVERITY.index, default="pass")
    if failures:
        status = "error"
    return Verdict(bench, metric, METRICS[metric].unit, status, points, failures, diagnosis)
