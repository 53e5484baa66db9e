"""The results history (SQLite) from runs built of seed 002's recorded all_reduce_perf outputs: with
the aws-ofi-nccl plugin (~122 GB/s at 128 MiB) and without it (~5 GB/s)."""

import sqlite3
from pathlib import Path

import matplotlib.image
import pytest

from commstack.cli import main
from commstack.paths import TOP
from commstack.results.history import (SCHEMA_VERSION, HistoryError, add_run, compare_to_history, connect,
                                       import_results, trend)
from commstack.results.parse import parse_nccl
from commstack.results.records import Record

SEEDS = TOP / "systems" / "references" / "seeds"
STEP = "all_reduce_perf-N2-n8-device-nccl-tests"


def run(root: Path, name: str, seed: str, started: float, repeats: int = 1) -> Path:
    """A results directory with one all_reduce_perf record holding the seed's table."""
    rows = parse_nccl((SEEDS / seed).read_text()).rows
    d = root / name
    Record(run_id=name, index=0, suite="cscs-images", system="alps-gh200", step=STEP, benchmark="all_reduce_perf",
           tool="nccl-tests", tags={"nodes": 2, "ntasks": 8}, metric="oop_busbw_GBps", unit="GB/s", verdict="pass",
           repeats=[rows] * repeats, started=started, nodelist=["nid005471", "nid005487"],
           stack={"nccl_net": {"nid005471": {"ofi_provider": "cxi", "network": []}}}).write(d)
    return d


def test_two_runs_show_in_the_trend_and_plot(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    add_run(run(tmp_path, "r1", "cscs-nccl-01.txt", 1000.0), db)
    add_run(run(tmp_path, "r2", "cscs-nccl-02.txt", 2000.0), db)
    points = trend(db, system="alps-gh200", step=STEP, size=134217728)
    assert [(p.run_id, p.median, p.size) for p in points] == [("r1", 122.57, 134217728), ("r2", 5.43, 134217728)]
    one, both = tmp_path / "one.png", tmp_path / "trend.png"
    capsys.readouterr()
    assert main(["history", "--history", str(db), "--size", "134217728", "--plot", str(both)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[:6] for line in out[1:3]] == [
        ["r1", "alps-gh200", f"cscs-images/{STEP}"[:48], "134217728", "122.570", "GB/s"],
        ["r2", "alps-gh200", f"cscs-images/{STEP}"[:48], "134217728", "5.430", "GB/s"]]
    assert out[3:] == ["2 figures, 2 runs, 1 series", f"plot: {both}"]
    assert main(["history", "--history", str(db), "--size", "134217728", "--step", STEP, "--plot", str(one)]) == 0
    image = matplotlib.image.imread(both)
    assert image.shape[:2] == (500, 1000) and image.std() > 0.05  # 10 x 5 inches at 100 dpi, not blank
    # the same plot from the same points; with r1 alone (a newer history) another
    assert (matplotlib.image.imread(one) == image).all()
    add_run(run(tmp_path, "r3", "cscs-nccl-01.txt", 3000.0), db)
    main(["history", "--history", str(db), "--size", "134217728", "--plot", str(one)])
    assert not (matplotlib.image.imread(one) == image).all()
    stored = sqlite3.connect(db).execute("SELECT stack, verdict FROM records WHERE run_id = 'r1'").fetchone()
    assert '"ofi_provider": "cxi"' in stored[0] and stored[1] == "pass"


def test_a_drop_outside_the_history_is_a_regression(tmp_path):
    db = tmp_path / "h.sqlite"
    for i in range(3):
        add_run(run(tmp_path, f"r{i}", "cscs-nccl-01.txt", 1000.0 + i), db)
    new = run(tmp_path, "new", "cscs-nccl-02.txt", 5000.0)
    changes = {c.size: c for c in compare_to_history(new, db, last=3)}
    assert changes[134217728].change == "regression" and changes[134217728].a == 122.57
    assert main(["compare", "--baseline", "history", str(new), "--history", str(db)]) == 1


def test_a_change_inside_the_historys_spread_is_not_a_regression(tmp_path):
    db = tmp_path / "h.sqlite"
    add_run(run(tmp_path, "r1", "cscs-nccl-01.txt", 1000.0), db)
    add_run(run(tmp_path, "r2", "cscs-nccl-02.txt", 2000.0), db)  # the history has seen both
    new = run(tmp_path, "new", "cscs-nccl-02.txt", 5000.0)
    changes = compare_to_history(new, db, last=10)
    assert {c.change for c in changes if c.size and c.size >= 1048576} == {"same"}
    # only the last N count: with --last 1 the baseline is r2 alone
    assert compare_to_history(new, db, last=1)[-1].a == compare_to_history(new, db, last=1)[-1].b


def test_import_fills_the_history_once(tmp_path):
    root = tmp_path / "results"
    run(root, "r1", "cscs-nccl-01.txt", 1000.0)
    run(root, "r2", "cscs-nccl-01.txt", 2000.0)
    assert main(["history", "import", str(root)]) == 0  # default: results/history.sqlite beside the runs
    db = root / "history.sqlite"
    assert import_results(root, db) == {"r1": 1, "r2": 1}  # again: replaced, not doubled
    count = sqlite3.connect(db).execute("SELECT count(*) FROM figures").fetchone()[0]
    assert count == 2 * len(parse_nccl((SEEDS / "cscs-nccl-01.txt").read_text()).rows)


def test_the_history_path_comes_from_the_environment(tmp_path, monkeypatch):
    db = tmp_path / "elsewhere.sqlite"
    monkeypatch.setenv("COMMSTACK_HISTORY", str(db))
    add_run(run(tmp_path / "results", "r1", "cscs-nccl-01.txt", 1000.0))
    assert db.is_file() and not (tmp_path / "results" / "history.sqlite").exists()


def test_other_files_and_versions_are_refused_by_name(tmp_path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not a database, just text " * 100)
    with pytest.raises(HistoryError, match="not a commstack history"):
        connect(bad)
    newer = tmp_path / "newer.sqlite"
    sqlite3.connect(newer).execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(HistoryError, match=f"schema version {SCHEMA_VERSION + 1}"):
        connect(newer)
    with pytest.raises(HistoryError, match="no history at"):
        trend(tmp_path / "missing.sqlite")
    assert main(["history", "--history", str(tmp_path / "missing.sqlite")]) == 2
