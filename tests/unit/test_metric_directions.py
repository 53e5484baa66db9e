"""Every judged metric's direction (issue 37): a real recorded output held to a reference 20 % better than it
is degraded, and held to one 20 % worse is better than plausible. The metrics come from the registry
(commstack.benchmarks.METRICS: every tool module's columns with a direction), so a new column is covered
once an output that prints it is recorded; the direction expected is the unit's (a time is better lower,
anything else higher), not the column's own flag, so a flipped `higher_is_better` fails here."""

import functools
from pathlib import Path

import pytest

from commstack.benchmarks import METRICS
from commstack.paths import TOP
from commstack.results.judge import judge
from commstack.results.parse import parse_results
from commstack.results.references import load_references

#: recorded real outputs (and the reproductions of tests/data/directions, for columns no recorded output
#: prints: nccl-tests' -C 1 cputime, rccl-tests' hipevt)
RECORDED = [TOP / "tests" / "data", TOP / "systems" / "references" / "seeds"]
TIME_UNITS = ("s", "ms", "us", "ns")


@functools.cache
def outputs() -> dict[str, tuple[Path, object]]:
    """metric -> (file, sweep) of the first complete recorded table that prints it above 0 in every row (a rate
    of 0 is no measurement: the judge fails it before any reference)."""
    found: dict[str, tuple[Path, object]] = {}
    files = sorted(p for d in RECORDED for p in d.rglob("*") if p.is_file() and p.suffix not in (".yaml", ".md", ".h"))
    for path in files:
        for r in parse_results(path.read_bytes().decode(errors="replace"), []):
            if r.error or r.sweep is None or r.benchmark is None:
                continue
            for metric in METRICS:
                if metric not in found and r.sweep.rows and all((row.get(metric) or 0) > 0 for row in r.sweep.rows):
                    found[metric] = (path, r.sweep)
    return found


def held_to(tmp_path, metric: str, factor: float):
    """The verdict of a recorded table that prints `metric`, against a reference `factor` times its figure
    at its largest size (tolerance 10 % either way)."""
    assert metric in outputs(), f"no recorded output prints {metric}: record one (tests/data)"
    path, sweep = outputs()[metric]
    row = sweep.rows[-1]
    refs = tmp_path / "refs.yaml"
    refs.write_text(f"system: directions\nreferences:\n  - id: r\n    benchmark: {sweep.benchmark}\n"
                    f"    metric: {metric}\n    points: {{{row['size']}: {row[metric] * factor!r}}}\n")
    return judge([sweep], {}, load_references(refs), metric, system="directions"), path


def better(metric: str) -> float:
    """The factor that makes a reference 20 % better than a figure, by the metric's unit."""
    return 1 / 1.2 if METRICS[metric].unit in TIME_UNITS else 1.2


@pytest.mark.parametrize("metric", sorted(METRICS))
def test_a_run_20_percent_short_of_its_reference_is_degraded(tmp_path, metric):
    verdict, path = held_to(tmp_path, metric, better(metric))
    assert verdict.verdict == "degraded", (path, verdict.summary())
    assert "-1" in verdict.reason and "allowed -10%" in verdict.reason, verdict.reason


@pytest.mark.parametrize("metric", sorted(METRICS))
def test_a_run_20_percent_beyond_its_reference_is_unstable(tmp_path, metric):
    verdict, path = held_to(tmp_path, metric, 1 / better(metric))
    assert verdict.verdict == "unstable", (path, verdict.summary())
    assert "is better than reference" in verdict.reason


def test_every_tool_column_with_a_direction_is_a_judged_metric():
    """The registry's METRICS hold every tool's directed columns, so the tests above see each."""
    from commstack.tools import MODULES
    directed = {name for m in MODULES for name, c in m.COLUMNS.items() if c.higher_is_better is not None}
    assert directed == set(METRICS) and "bandwidth_GiBps" in directed and "oop_hipevt_us" in directed


#: (a column's unit, the unit a report shows it in) -> the factor between them, from the units themselves
UNIT_FACTORS = {("us", "µs"): 1.0, ("ms", "ms"): 1.0, ("MB/s", "GB/s"): 1e-3, ("GB/s", "GB/s"): 1.0,
                ("GiB/s", "GiB/s"): 1.0, ("msg/s", "messages/s"): 1.0, ("%", "%"): 1.0, (None, ""): 1.0}


@pytest.mark.parametrize("metric", sorted(m for m, c in METRICS.items() if c.shown))
def test_a_report_shows_each_metric_in_the_unit_it_names(metric):
    """The display factor of every shown metric (a report's figures and the trend plot's axis) is the one
    between its recorded unit and the unit the report names."""
    from commstack.results.report import shown
    label, unit, factor = shown(metric)
    assert label and factor == UNIT_FACTORS[(METRICS[metric].unit, unit)]
