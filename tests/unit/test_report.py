"""Reports, plots and compare, built from the seeds' recorded real tables."""

import csv
import json
from pathlib import Path

import matplotlib.image
import pytest

from commstack.paths import TOP
from commstack.results.judge import load_references
from commstack.results.parse import parse_osu
from commstack.results.report import ReportError, compare, compare_table, load_records, write_report
from commstack.config import load_system

DATA = TOP / "systems" / "references" / "seeds"
REFS = load_references(load_system("alps-gh200").references)


def record(results: Path, step: str, seed: str, suite: str = "cscs-images", system: str = "alps-gh200",
           repeats: int = 1, **tags) -> dict:
    sweep = parse_osu((DATA / seed).read_text())[0]
    metric = "bandwidth_MBps" if "bandwidth_MBps" in sweep.columns else "latency_us"
    tags = {"nodes": 2, "ntasks": 2, "memory": "host", "environment": "osu-mb", **tags}
    rec = {"suite": suite, "step": step, "system": system, "benchmark": sweep.benchmark, "metric": metric,
           "tags": tags, "repeats": [sweep.rows] * repeats, "verdict": "pass", "nodelist": ["nid001", "nid002"],
           "commands": [["srun", "-N2", "--mpi=pmix", sweep.benchmark]]}
    d = results / "steps" / step
    d.mkdir(parents=True)
    (d / "record.json").write_text(json.dumps(rec))
    return rec


def test_report_from_seed_tables(tmp_path):
    record(tmp_path, "osu_bw-cxi", "cscs-osu-01.txt", cxi_hook=True)
    record(tmp_path, "osu_bw-no-cxi", "cscs-osu-10.txt", environment="osu-mb-no-cxi", cxi_hook=False)
    record(tmp_path, "osu_latency", "cscs-osu-07.txt", cxi_hook=True)
    md = write_report(tmp_path, REFS).read_text()
    out = tmp_path / "report"
    pngs = sorted(out.glob("*.png"))
    assert [p.name for p in pngs] == ["osu_bw-host.png", "osu_latency-host.png"]
    for p in pngs:
        img = matplotlib.image.imread(p)
        assert p.stat().st_size > 10_000 and img.shape[0] > 300 and img.shape[1] > 500
    assert "| 4194304 | 23982.18 | 3121.42 |" in md  # seed 000: CXI hook vs none, 4 MiB
    assert "![osu_bw host](osu_bw-host.png)" in md and "# commstack report: cscs-images on alps-gh200" in md
    rows = list(csv.DictReader((out / "rows.csv").open()))
    assert len(rows) == 23 + 23 + 23
    big = [r for r in rows if r["step"] == "osu_bw-cxi" and r["size"] == "4194304"]
    assert float(big[0]["value"]) == 23982.18


def test_container_vs_native_report_has_bars_with_error_bars(tmp_path):
    record(tmp_path, "lat-cxi", "cscs-osu-07.txt", suite="container-vs-native", repeats=3)
    record(tmp_path, "lat-no-cxi", "cscs-osu-12.txt", suite="container-vs-native", repeats=3,
           environment="osu-mb-no-cxi")
    md = write_report(tmp_path).read_text()
    assert (tmp_path / "report" / "osu_latency-host.png").stat().st_size > 10_000
    assert "± 0.00" in md  # three identical repeats: mean with its (zero) spread


def test_compare_flags_the_no_cxi_run_as_a_regression(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, "osu_bw", "cscs-osu-01.txt")
    record(b, "osu_bw", "cscs-osu-10.txt")
    changes = {c.size: c for c in compare(a, b)}
    assert changes[4194304].verdict == "regression" and round(changes[4194304].ratio, 3) == 0.13
    assert "regressions" in compare_table(list(changes.values()))
    assert {c.verdict for c in compare(a, a)} == {"same"}


def test_bad_inputs_are_clear_and_leave_no_half_report(tmp_path):
    with pytest.raises(ReportError, match="no suite results"):
        (tmp_path / "empty").mkdir() or load_records(tmp_path / "empty")
    with pytest.raises(ReportError, match="no baseline at"):
        compare(tmp_path / "missing", tmp_path / "empty")
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, "osu_bw", "cscs-osu-01.txt")
    record(b, "osu_bw", "cscs-osu-01.txt", system="local")
    with pytest.raises(ReportError, match=r"different systems: \['alps-gh200'\] vs \['local'\]"):
        compare(a, b)
    broken = record(tmp_path / "c", "x", "cscs-osu-01.txt")
    broken["metric"] = "furlongs"
    (tmp_path / "c" / "steps" / "x" / "record.json").write_text(json.dumps(broken))
    with pytest.raises(KeyError):
        write_report(tmp_path / "c")
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["steps"]  # nothing half-written
