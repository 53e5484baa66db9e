"""The results history (SQLite) from runs built of seed 002's recorded all_reduce_perf outputs: with
the aws-ofi-nccl plugin (~122 GB/s at 128 MiB) and without it (~5 GB/s)."""

import json
import re
import sqlite3
import time
from pathlib import Path

import matplotlib.image
import pytest

from commstack.cli.main import main
from commstack.paths import TOP
from commstack.results import history
from commstack.results.history import (SCHEMA_VERSION, HistoryError, add_finished, add_run, compare_to_history,
                                       connect, import_results, plot, trend, trend_table)
from commstack.run.doubts import checked
from commstack.tools import nccl_tests
from commstack.results.records import Record, read_run

SEEDS = TOP / "systems" / "references" / "seeds"
STEP = "all_reduce_perf-N2-n8-device-nccl-tests"


def seed_rows(seed: str) -> list[dict]:
    """The rows of a seed's one nccl-tests table."""
    [sweep] = nccl_tests.parse((SEEDS / seed).read_text())
    return sweep.rows


def run(root: Path, name: str, seed: str, started: float, repeats: int = 1,
        nodelist: tuple[str, ...] = ("nid005471", "nid005487")) -> Path:
    """A results directory with one all_reduce_perf record holding the seed's table."""
    rows = seed_rows(seed)
    d = root / name
    Record(run_id=name, index=0, suite="cscs-images", system="alps-gh200", step=STEP, benchmark="all_reduce_perf",
           tool="nccl-tests", tags={"nodes": 2, "ntasks": 8}, metric="oop_busbw_GBps", unit="GB/s", verdict="pass",
           repeats=[rows] * repeats, started=started, nodelist=list(nodelist),
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
    assert count == 2 * len(seed_rows("cscs-nccl-01.txt"))


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


def add_record(d: Path, step: str, rows_per_repeat: list[list[dict]], started: float | None = 1000.0) -> None:
    Record(run_id=d.name, index=len(list(d.glob("steps/*"))), suite="cscs-images", system="alps-gh200", step=step,
           benchmark="all_reduce_perf", tool="nccl-tests", tags={"nodes": 2}, metric="oop_busbw_GBps", unit="GB/s",
           verdict="pass" if rows_per_repeat else "not-run", repeats=rows_per_repeat, started=started).write(d)


def test_against_the_history_steps_and_sizes_it_lacks_values_it_cannot_use_and_its_noise(tmp_path):
    db = tmp_path / "h.sqlite"
    good = seed_rows("cscs-nccl-01.txt")
    bad = seed_rows("cscs-nccl-02.txt")
    for i in range(3):
        add_run(run(tmp_path, f"r{i}", "cscs-nccl-02.txt", 1000.0 + i), db)  # without the plugin: ~5 GB/s
    zero = tmp_path / "zero"
    add_record(zero, STEP, [[{**r, "oop_busbw_GBps": 0.0} for r in good]])
    add_run(zero, db)  # a run of zeros is no baseline
    new = tmp_path / "new"
    add_record(new, "a-not-run", [])
    add_record(new, "b-new-step", [good])
    nan = [dict(r) for r in good]
    nan[-1]["oop_busbw_GBps"] = float("nan")
    add_record(new, STEP, [nan])
    changes = compare_to_history(new, db, last=10)
    assert [(c.step, c.size, c.change) for c in changes[:2]] == [
        ("cscs-images/a-not-run", None, "missing in B"), ("cscs-images/b-new-step", 8, "missing in A")]
    assert {c.change for c in changes if c.step.endswith("b-new-step")} == {"missing in A"}
    mine = {c.size: c for c in changes if c.step.endswith(STEP)}
    assert (mine[134217728].change, mine[134217728].a) == ("invalid", 5.43)
    assert (mine[67108864].change, mine[67108864].a, mine[67108864].b) == ("better", 5.53, 107.69)  # the plugin back
    # the same drop inside the run's own repeat spread (twice its standard deviation) is no regression
    worse = tmp_path / "worse"
    add_record(worse, STEP, [[{**r, "oop_busbw_GBps": r["oop_busbw_GBps"] * 0.8} for r in bad]] * 3)
    assert {c.size: c.change for c in compare_to_history(worse, db)}[134217728] == "regression"
    spread = tmp_path / "spread"
    add_record(spread, STEP, [[{**r, "oop_busbw_GBps": r["oop_busbw_GBps"] * f * 0.8} for r in bad]
                              for f in (0.7, 1.0, 1.3)])
    assert {c.size: c.change for c in compare_to_history(spread, db)}[134217728] == "same"


def test_the_history_file_its_directory_and_what_import_and_plot_refuse(tmp_path, capsys):
    real = tmp_path / "real.sqlite"
    connect(real).close()
    link = tmp_path / "link.sqlite"
    link.symlink_to(real)
    with pytest.raises(HistoryError, match="link.sqlite exists and is a symlink"):
        connect(link)
    deep = tmp_path / "new" / "dir" / "h.sqlite"
    connect(deep).close()
    assert deep.is_file()
    with pytest.raises(HistoryError, match="no runs"):
        import_results(tmp_path / "new")
    one = run(tmp_path / "runs", "r1", "cscs-nccl-01.txt", 1000.0)
    assert import_results(one) == {"r1": 1} and (tmp_path / "runs" / "history.sqlite").is_file()
    nan = tmp_path / "runs" / "r2"
    rows = seed_rows("cscs-nccl-01.txt")
    add_record(nan, STEP, [[{**r, "oop_busbw_GBps": float("nan")} for r in rows]], started=None)
    import_results(nan)
    points = trend(tmp_path / "runs" / "history.sqlite", size=8)
    assert [(p.run_id, p.median, p.stdev) for p in points] == [("r2", None, 0.0), ("r1", 0.0, 0.0)]  # no start first
    table = trend_table(points).splitlines()
    assert table[1].split()[4:] == ["-", "GB/s", "pass", "(-)"]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(1000.0))
    assert table[2].split()[4:] == ["0.000", "GB/s", "pass", *f"({when})".split()]
    with pytest.raises(HistoryError, match="nothing to plot"):
        plot([])


def scaled_run(root: Path, name: str, factors: list[float], started: float, seed: str = "cscs-nccl-02.txt") -> Path:
    """A run of one all_reduce_perf record: the seed's table once per repeat, each figure times its factor."""
    rows = seed_rows(seed)
    d = root / name
    add_record(d, STEP, [[{**r, "oop_busbw_GBps": r["oop_busbw_GBps"] * f} for r in rows] for f in factors], started)
    return d


def test_the_history_spread_and_the_runs_noise_set_the_threshold(tmp_path):
    db = tmp_path / "h.sqlite"
    for i, f in enumerate((1.0, 1.0, 1.4)):  # the history has seen +40 % once
        add_run(scaled_run(tmp_path, f"r{i}", [f], 1000.0 + i), db)
    big = 134217728

    def change(factors):
        return {c.size: c.change for c in compare_to_history(scaled_run(tmp_path, "new", factors, 5000.0), db)}[big]
    assert change([1.3]) == "same"        # inside what the history has seen
    assert change([1.5]) == "better"      # beyond it, though by less than 100 %
    assert change([0.85]) == "regression"
    assert change([0.765, 0.85, 0.935]) == "same"        # -15 %, repeats spread 10 % (twice that: 20 %)
    assert change([0.675, 0.75, 0.825]) == "regression"  # -25 %: beyond twice the spread
    # sizes where the history printed 0.00 have no baseline; small but real figures do
    small = {c.size: c for c in compare_to_history(scaled_run(tmp_path, "new", [1.0], 5000.0), db)}
    zero = [r["size"] for r in seed_rows("cscs-nccl-02.txt") if r["oop_busbw_GBps"] == 0]
    assert sorted(s for s, c in small.items() if c.change == "missing in A") == zero
    assert {c.change for s, c in small.items() if s not in zero} == {"same"}


def test_what_the_history_stores_of_a_run(tmp_path):
    rows = seed_rows("cscs-nccl-01.txt")
    d = tmp_path / "runs" / "r1"
    nan = [dict(r) for r in rows]
    nan[0]["oop_busbw_GBps"] = float("nan")
    add_record(d, STEP, [rows, nan], started=2000.0)
    add_record(d, "other", [rows], started=1000.0)
    (tmp_path / "runs" / "notes").mkdir()  # not a run: left out
    (tmp_path / "runs" / "link").symlink_to(d)  # a second name for r1: left out
    db = tmp_path / "elsewhere.sqlite"
    assert import_results(tmp_path / "runs", db) == {"r1": 2} and not (tmp_path / "runs" / "history.sqlite").exists()
    con = sqlite3.connect(db)
    assert con.execute("SELECT started FROM runs").fetchall() == [(1000.0,)]  # the run's first start
    assert con.execute("SELECT median, stdev, repeats FROM figures WHERE step = ? AND size = 8", (STEP,)).fetchone() \
        == (None, 0.0, 2)  # a NaN repeat: no median, no spread


def test_the_trend_plot_as_svg_names_its_runs_axes_system_and_series(tmp_path, capsys):
    """An SVG plot keeps its text: tick labels, axis labels, title and legend, each in a comment."""
    db = tmp_path / "h.sqlite"
    add_run(run(tmp_path, "r1", "cscs-nccl-01.txt", 1000.0), db)
    add_run(run(tmp_path, "r2", "cscs-nccl-02.txt", 2000.0), db)
    svg = tmp_path / "trend.svg"
    assert main(["history", "--history", str(db), "--size", "134217728", "--plot", str(svg)]) == 0
    text = svg.read_text()
    assert text.startswith("<?xml") and 'width="720pt" height="360pt"' in text  # 10 x 5 inches
    texts = re.findall(r"<!-- (.*?) -->", text)
    runs = [time.strftime("%m-%d %H:%M", time.localtime(t)) for t in (1000.0, 2000.0)]
    assert texts[:3] == [*runs, "run"] and texts[-3:] == [
        "bus bandwidth (GB/s)", "alps-gh200", f"{STEP} 134217728 B"]
    assert texts[3:-3] == ["0", "20", "40", "60", "80", "100", "120"]  # GB/s as stored
    assert text.count("rotate(-30)") == 2  # the dates slanted
    assert "M 3 0 \nL -3 -0" in text  # error bar caps 3 points wide each side
    one = plot([p for p in trend(db, size=134217728) if p.run_id == "r1"], "svg").decode()  # one run
    assert re.findall(r"<!-- (.*?) -->", one)[0] == time.strftime("%m-%d %H:%M", time.localtime(1000.0))


def test_a_change_of_exactly_what_the_history_has_seen_is_the_same(tmp_path):
    rows = seed_rows("cscs-nccl-01.txt")

    def at(name: str, value: float, started: float) -> Path:
        d = tmp_path / name
        add_record(d, STEP, [[{**r, "oop_busbw_GBps": value} for r in rows]], started)
        return d
    for side, (lo, hi) in {"up": (4.0, 5.0), "down": (4.0, 3.0)}.items():
        db = tmp_path / f"{side}.sqlite"
        for i, v in enumerate((lo, lo, hi)):  # the history has seen 25 % up (or down) once: binary fractions
            add_run(at(f"{side}{i}", v, 1000.0 + i), db)
        assert {c.change for c in compare_to_history(at(f"{side}-new", hi, 5000.0), db)} == {"same"}


def test_a_missing_results_directory_and_a_figure_row_that_does_not_fit(tmp_path):
    with pytest.raises(HistoryError, match="nope: no such results directory"):
        import_results(tmp_path / "nope")
    db = tmp_path / "h.sqlite"
    add_run(run(tmp_path, "r1", "cscs-nccl-01.txt", 1000.0), db)
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE figures SET size = 'big' WHERE size = 8")
    con.close()
    with pytest.raises(HistoryError, match=r"a figure row does not fit the schema: 5: Input should be a valid "
                                           r"integer.*\(got .big.\)"):
        trend(db)
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE figures SET stdev = 'wide' WHERE size = 'big'")
    con.close()
    with pytest.raises(HistoryError, match=r"does not fit the schema: 5: .*\(got .big.\)"):  # the first of two
        trend(db)


def test_a_history_place_that_cannot_be_used_is_named_and_a_finished_run_gets_it_back(tmp_path, monkeypatch, capsys):
    """`history import` with --history below a regular file was a NotADirectoryError traceback. A history directory
    that cannot be made, or one others may write, escaped the hook a finished run calls (which returns what it names
    after the verdicts) and each step's doubts (which pass an unusable history by). Each is a HistoryError now."""
    one = run(tmp_path / "runs", "r1", "cscs-nccl-01.txt", 1000.0)
    (tmp_path / "afile").write_text("a file, not a directory\n")
    capsys.readouterr()
    assert main(["history", "import", str(one), "--history", str(tmp_path / "afile" / "h.sqlite")]) == 5
    assert capsys.readouterr().err == f"commstack history: error: cannot write {tmp_path / 'afile'}: Not a directory\n"
    monkeypatch.setenv("COMMSTACK_HISTORY", "/proc/no-such-directory/h.sqlite")  # no directory can be made there
    error = add_finished(one)
    assert isinstance(error, HistoryError) and error.exit_status == 5
    assert str(error).startswith("cannot write /proc/no-such-directory: ")
    shared = tmp_path / "shared"
    add_run(one, shared / "h.sqlite")
    shared.chmod(0o777)  # writable by others, without the sticky bit
    monkeypatch.setenv("COMMSTACK_HISTORY", str(shared / "h.sqlite"))
    assert "has mode 0777, writable by others without the sticky bit" in str(add_finished(one))
    (record,) = read_run(one)
    with checked(record, one):
        pass
    assert [w for w in record.warnings if "history" in w] == []


def test_a_history_sqlite_cannot_open_is_named_so_not_damaged(tmp_path, capsys):
    """SQLite opens no path of more than 512 bytes (nor a file the user may not read): such a history, even a missing
    one, was "not a commstack history, or damaged". It is one that cannot be opened, bad input (exit 2)."""
    one = run(tmp_path, "r1", "cscs-nccl-01.txt", 1000.0)
    deep = tmp_path.joinpath(*["d" * 200] * 3) / "h.sqlite"
    capsys.readouterr()
    assert main(["history", "import", str(one), "--history", str(deep)]) == 2
    assert capsys.readouterr().err == (f"commstack history: error: {deep}: cannot open the history (unable to open "
                                       "database file)\n")


def test_a_finished_run_adds_itself_to_the_history_or_returns_what_refused_it(tmp_path, monkeypatch):
    """The hook a run calls as it ends: its records go into the history ($COMMSTACK_HISTORY here); a history that
    cannot take them is returned, for the run to name after its verdicts, and left as it was."""
    db = tmp_path / "h.sqlite"
    monkeypatch.setenv("COMMSTACK_HISTORY", str(db))
    one = run(tmp_path / "runs", "r1", "cscs-nccl-01.txt", 1000.0)
    assert add_finished(one) is None
    assert [(p.run_id, p.median) for p in trend(db, size=134217728)] == [("r1", 122.57)]
    notes = tmp_path / "notes.sqlite"
    notes.write_text("not a database, just text " * 100)
    monkeypatch.setenv("COMMSTACK_HISTORY", str(notes))
    error = add_finished(one)
    assert isinstance(error, HistoryError) and str(error).startswith(f"{notes}: not a commstack history, or damaged")
    assert notes.read_text() == "not a database, just text " * 100


def test_a_full_history_says_so_and_is_left_as_it_was(tmp_path, monkeypatch, capsys):
    """SQLite's "database or disk is full" (SQLITE_FULL, result code 13) is a full file system, exit 5, not a
    damaged history, and the run is not half added. The connection's page limit (PRAGMA max_page_count) stands
    in for the full disk: the same error from SQLite, without root's small tmpfs (tests/hostile has that one)."""
    db = tmp_path / "h.sqlite"
    add_run(run(tmp_path, "r1", "cscs-nccl-01.txt", 1000.0), db)
    connect = history.connect

    def full(path: Path) -> sqlite3.Connection:
        con = connect(path)
        con.execute(f"PRAGMA max_page_count = {con.execute('PRAGMA page_count').fetchone()[0]}")
        return con
    monkeypatch.setattr(history, "connect", full)
    r2 = run(tmp_path, "r2", "cscs-nccl-02.txt", 2000.0)
    add_record(r2, "a-thousand-sizes", [[{"size": size, "oop_busbw_GBps": 1.0} for size in range(1, 1001)]])
    capsys.readouterr()
    assert main(["history", "import", str(r2), "--history", str(db)]) == 5
    assert capsys.readouterr().err == (f"commstack history: error: {db}: the file system is full (database or disk is "
                                       "full); the history is as it was\n")
    assert {p.run_id for p in trend(db)} == {"r1"}


def damage(db: Path, table: str) -> None:
    """Overwrite the first page of `table` in the history `db`: its schema and header are intact."""
    con = sqlite3.connect(db)
    page = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    data = bytearray(db.read_bytes())
    data[(page - 1) * size:page * size] = b"\xff" * size
    db.write_bytes(bytes(data))


def test_a_history_damaged_past_its_schema_is_named_when_read_or_added_to(tmp_path, capsys):
    """A history whose header and tables are right but whose figures are damaged opens; reading it (`history`,
    `compare --baseline history`) or adding a run to it names the damage, exit 2, rather than a traceback, a
    regression or a run said to be added."""
    db = tmp_path / "h.sqlite"
    add_run(run(tmp_path, "r1", "cscs-nccl-01.txt", 1000.0), db)
    damage(db, "figures")
    r2 = run(tmp_path, "r2", "cscs-nccl-01.txt", 2000.0)
    capsys.readouterr()
    read = f"{db}: cannot read the history: damaged (database disk image is malformed)\n"
    assert main(["history", "--history", str(db)]) == 2
    assert capsys.readouterr().err == f"commstack history: error: {read}"
    assert main(["compare", "--baseline", "history", str(r2), "--history", str(db)]) == 2
    assert capsys.readouterr().err == f"commstack compare: error: {read}"
    assert main(["history", "import", str(r2), "--history", str(db)]) == 2
    assert capsys.readouterr() == ("", f"commstack history: error: {db}: cannot add {r2}: damaged history (database "
                                       "disk image is malformed)\n")


def test_a_file_of_our_version_without_our_tables_or_columns_is_refused_naming_the_table(tmp_path, capsys):
    """A file that says it is version 1 but lacks a table, or has one of other columns, is not a history of ours:
    `history` names the table and what is wrong with it (exit 2), not the first query that stumbles on it."""
    missing, other = tmp_path / "missing.sqlite", tmp_path / "other.sqlite"
    sqlite3.connect(missing).execute("PRAGMA user_version = 1")
    sqlite3.connect(other).executescript("CREATE TABLE runs (run_id TEXT PRIMARY KEY, path TEXT); "
                                         "PRAGMA user_version = 1;")
    capsys.readouterr()
    for db, what in ((missing, "is missing"),
                     (other, "has columns ['run_id', 'path'], not ['run_id', 'path', 'started', 'added']")):
        assert main(["history", "--history", str(db)]) == 2
        assert capsys.readouterr().err == (f"commstack history: error: {db}: table runs {what}; not a commstack "
                                           "history, or damaged\n")


def test_a_nodes_history_is_the_steps_that_ran_on_it_by_its_whole_name(tmp_path, capsys):
    """`history --node` (a node's history across screens and runs): the steps whose node list holds that node,
    by its whole name: nid00547 is no node of a step on nid005471."""
    db = tmp_path / "h.sqlite"
    add_run(run(tmp_path, "r1", "cscs-nccl-01.txt", 1000.0), db)
    add_run(run(tmp_path, "r2", "cscs-nccl-02.txt", 2000.0, nodelist=("nid005487", "nid005490")), db)
    capsys.readouterr()

    def runs(node: str) -> list[str]:
        assert main(["history", "--history", str(db), "--size", "134217728", "--node", node]) == 0
        return [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:-1]]
    assert runs("nid005471") == ["r1"] and runs("nid005490") == ["r2"]
    assert runs("nid005487") == ["r1", "r2"]
    assert runs("nid00547") == []


def test_tags_and_stack_facts_are_stored_as_json_with_sorted_keys(tmp_path):
    """A record's tags and stack facts, in whatever order its record.json lists them (nested ones too), are stored
    with sorted keys: the same facts are the same text for a query of the history that compares them."""
    rows = seed_rows("cscs-nccl-01.txt")
    d = tmp_path / "r1"
    Record(run_id="r1", index=0, suite="cscs-images", system="alps-gh200", step=STEP, benchmark="all_reduce_perf",
           tool="nccl-tests", tags={"ntasks": 8, "nodes": 2}, metric="oop_busbw_GBps", unit="GB/s", verdict="pass",
           repeats=[rows], stack={"nccl_net": {"ofi_provider": "cxi", "network": []}, "mpi": "cray-mpich"}).write(d)
    assert list(json.loads((d / "steps" / f"cscs-images--{STEP}" / "record.json").read_text())["tags"]) == [
        "ntasks", "nodes"]
    db = tmp_path / "h.sqlite"
    add_run(d, db)
    assert sqlite3.connect(db).execute("SELECT tags, stack FROM records").fetchone() == (
        '{"nodes": 2, "ntasks": 8}', '{"mpi": "cray-mpich", "nccl_net": {"network": [], "ofi_provider": "cxi"}}')


def test_a_plot_through_a_file_is_refused_before_the_work(tmp_path, capsys):
    """`--plot afile/x.png` where afile is a file: a named error (exit 5), no traceback."""
    (tmp_path / "afile").write_text("")
    out = tmp_path / "afile" / "x.png"
    assert main(["history", "--history", str(tmp_path / "h.sqlite"), "--plot", str(out)]) == 5
    assert capsys.readouterr().err.strip() == f"commstack history: error: cannot write {out}: Not a directory"
