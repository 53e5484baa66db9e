"""The results history: every record of every run in one SQLite file (stdlib sqlite3), by default
results/history.sqlite next to the runs (COMMSTACK_HISTORY or --history elsewhere), and a run judged against
it (docs/harness.md#batch-jobs-history-and-exports). A file of another schema version (`PRAGMA user_version`),
one without our tables and columns, a damaged one, and a row that does not fit the schema are refused by name.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import sqlite3
import statistics
import time
from pathlib import Path

from pydantic import ValidationError
from pydantic.dataclasses import dataclass

from commstack import exits
from commstack.errors import CommstackError
from commstack.files import FileWriteError, UnsafePathError, checked_parent, regular_or_missing, results_dir
from commstack.results.compare import Change
from commstack.benchmarks import METRICS, shown, shown_value
from commstack.results.records import RECORD, Record, read_run

SCHEMA_VERSION = 1
FILENAME = "history.sqlite"
SCHEMA = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, path TEXT NOT NULL, started REAL, added REAL NOT NULL);
CREATE TABLE records (
  run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, suite TEXT NOT NULL, step TEXT NOT NULL,
  system TEXT NOT NULL, benchmark TEXT NOT NULL, tool TEXT NOT NULL, metric TEXT NOT NULL, unit TEXT NOT NULL,
  verdict TEXT NOT NULL, reason TEXT NOT NULL, started REAL, nodelist TEXT NOT NULL, tags TEXT NOT NULL,
  stack TEXT NOT NULL, PRIMARY KEY (run_id, suite, step));
CREATE TABLE figures (
  run_id TEXT NOT NULL, suite TEXT NOT NULL, step TEXT NOT NULL, size INTEGER NOT NULL,
  median REAL, stdev REAL NOT NULL, repeats INTEGER NOT NULL, PRIMARY KEY (run_id, suite, step, size),
  FOREIGN KEY (run_id, suite, step) REFERENCES records(run_id, suite, step) ON DELETE CASCADE);
CREATE INDEX figures_by_step ON figures (suite, step, size);
"""


class HistoryError(CommstackError):
    """A history file that is not ours, of another schema version, or a query it cannot answer."""


class HistoryWriteError(HistoryError):
    """The history could not be written: its directory not made or reached (a read-only file system, a file on the
    way), or its file system (or the user's quota) full. Not bad input; a HistoryError, so that a run names it
    after its verdicts and its doubts pass it by."""

    exit_status = exits.UNWRITTEN


#: sqlite's result code for "database or disk is full" (the low byte of an extended code)
SQLITE_FULL = 13


def _db_error(path: Path, e: sqlite3.DatabaseError, damaged: str) -> HistoryError:
    """A sqlite error as a named one: a full file system says so; anything else is the history `damaged`."""
    if (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF == SQLITE_FULL:
        return HistoryWriteError(f"{path}: the file system is full ({e}); the history is as it was")
    return HistoryError(damaged)


def default_path(results_root: Path) -> Path:
    env = os.environ.get("COMMSTACK_HISTORY")
    return Path(env) if env else results_root / FILENAME


def _columns(db: sqlite3.Connection) -> dict[str, list[str]]:
    return {t: [row[1] for row in db.execute(f"PRAGMA table_info({t})")] for t in ("runs", "records", "figures")}


#: the tables and columns SCHEMA makes: what a history file of SCHEMA_VERSION must have
with contextlib.closing(sqlite3.connect(":memory:")) as _schema:
    _schema.executescript(SCHEMA)
    COLUMNS = _columns(_schema)


def connect(path: Path) -> sqlite3.Connection:
    """The history at `path`, created with the current schema when new."""
    for check, rule in ((regular_or_missing, "; the history is kept only in a regular file"), (checked_parent, "")):
        try:
            check(path)
        except UnsafePathError as e:  # not a regular file, or a directory others may change
            raise HistoryError(f"{e}{rule}") from None
        except OSError as e:  # a file, not a directory, on the way
            raise HistoryWriteError(str(FileWriteError.of(path.parent, e))) from e
    try:
        db = sqlite3.connect(path, timeout=30)
    except sqlite3.DatabaseError as e:  # too long a path, no permission
        raise _db_error(path, e, f"{path}: cannot open the history ({e})") from None
    try:
        db.execute("PRAGMA foreign_keys = ON")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if version == 0 and tables == 0:
            with db:
                db.executescript(SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")
        elif version != SCHEMA_VERSION:
            raise HistoryError(f"{path}: history schema version {version}, this commstack reads {SCHEMA_VERSION}")
        found = _columns(db)
        for table, columns in COLUMNS.items():
            if found[table] != columns:
                raise HistoryError(f"{path}: table {table} " + (f"has columns {found[table]}, not {columns}"
                                   if found[table] else "is missing") + "; not a commstack history, or damaged")
    except BaseException as e:
        db.close()
        if isinstance(e, sqlite3.DatabaseError):
            raise _db_error(path, e, f"{path}: not a commstack history, or damaged ({e})") from None
        raise
    return db


def add_finished(run_dir: Path) -> HistoryError | None:
    """The hook a finished run calls: its records into the default history. A history that cannot take
    them is returned, not raised, so that the run's own files and verdicts come first; the caller names it."""
    try:
        add_run(run_dir)
    except HistoryError as e:
        return e
    return None


def add_run(run_dir: Path, path: Path | None = None) -> int:
    """Store every record of a run; returns how many. Idempotent."""
    records = read_run(run_dir)
    path = path or default_path(run_dir.resolve().parent)
    db = connect(path)
    try:
        with db:  # one transaction: a run is in the history whole or not at all
            _store(db, run_dir, records)
    except sqlite3.DatabaseError as e:
        raise _db_error(path, e, f"{path}: cannot add {run_dir}: damaged history ({e})") from None
    finally:
        db.close()
    return len(records)


def _store(db: sqlite3.Connection, run_dir: Path, records: list[Record]) -> None:
    run_id = records[0].run_id
    started = min((r.started for r in records if r.started), default=None)
    db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
    db.execute("INSERT INTO runs VALUES (?, ?, ?, ?)", (run_id, str(run_dir.resolve()), started, time.time()))
    db.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        (run_id, r.suite, r.step, r.system, r.benchmark, r.tool, r.metric, r.unit, r.verdict, r.reason, r.started,
         json.dumps(r.nodelist), json.dumps(r.tags, sort_keys=True), json.dumps(r.stack, sort_keys=True, default=str))
        for r in records])
    db.executemany("INSERT INTO figures VALUES (?, ?, ?, ?, ?, ?, ?)", [
        (run_id, r.suite, r.step, size, median if math.isfinite(median) else None,
         stdev if math.isfinite(stdev) else 0.0, n)
        for r in records for size, (median, stdev, n) in r.medians().items()])


def import_results(root: Path, path: Path | None = None) -> dict[str, int]:
    """Every run under `root` (a run directory, or a directory of runs) into the history."""
    try:
        os.close(results_dir(root))  # ours, under parents nobody else can change
    except UnsafePathError as e:
        raise HistoryError(str(e)) from None
    runs = [root] if (root / "steps").is_dir() else sorted(
        p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and any(p.glob(f"steps/*/{RECORD}")))
    if not runs:
        raise HistoryError(f"{root}: no runs (directories with steps/*/{RECORD})")
    return {run.name: add_run(run, path) for run in runs}  # by default the history beside the runs, as add_run's


@dataclass
class Point:
    run_id: str
    started: float | None
    system: str
    suite: str
    step: str
    size: int
    metric: str
    unit: str
    median: float | None
    stdev: float
    verdict: str


def trend(path: Path, system: str | None = None, suite: str | None = None, step: str | None = None,
          size: int | None = None, node: str | None = None) -> list[Point]:
    """The judged figure of every matching step and size, oldest run first; `node`: the steps that ran on it
    (a node's history across screens and runs)."""
    given = [(f"{column} = ?", value) for column, value in (("r.system", system), ("r.suite", suite),
                                                             ("r.step", step), ("f.size", size)) if value is not None]
    if node is not None:  # the node list is stored as JSON: the name with its quotes, exactly
        given.append(("instr(r.nodelist, ?) > 0", json.dumps(node)))
    where, args = [c for c, _ in given], [v for _, v in given]
    if not path.is_file():
        raise HistoryError(f"no history at {path}: runs add themselves when they finish, or "
                           "`commstack history import RESULTS_DIR`")
    db = connect(path)
    try:
        rows = db.execute(
            "SELECT f.run_id, coalesce(r.started, u.started), r.system, r.suite, r.step, f.size, r.metric, r.unit, "
            "f.median, f.stdev, r.verdict FROM figures f JOIN records r USING (run_id, suite, step) "
            "JOIN runs u USING (run_id)" + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY r.system, r.suite, r.step, f.size, coalesce(r.started, u.started), f.run_id", args).fetchall()
    except sqlite3.DatabaseError as e:
        raise HistoryError(f"{path}: cannot read the history: damaged ({e})") from None
    finally:
        db.close()
    try:
        return [Point(*row) for row in rows]
    except ValidationError as e:
        first = e.errors()[0]
        raise HistoryError(f"{path}: a figure row does not fit the schema: {'.'.join(map(str, first['loc']))}: "
                           f"{first['msg']} (got {first['input']!r:.60}); damaged or written by something else") \
            from None


#: a figure this many times above or below its step's history (median of its last runs) is a warning,
#: with references or without: a machine that was busy, a wrong unit, a broken build
FAR_OFF = 100


def far_off(record: Record, run_dir: Path, last: int = 10) -> list[str]:
    """A warning when `record`'s median is FAR_OFF times off the median of the same step's last `last` runs
    in the default history at some size: the first such size, and how many more; none without a history."""
    path = default_path(run_dir.resolve().parent)
    if not record.repeats or not path.is_file():
        return []
    try:
        points = trend(path, record.system, record.suite, record.step)
    except HistoryError:  # the run names a history it cannot use when it adds itself
        return []
    _, unit, factor = shown(record.metric)
    out = []
    for size, (value, _, _) in record.medians().items():
        past = _past(points, record, size, last)
        if past and math.isfinite(value) and value > 0:
            base = statistics.median(past)
            if not 1 / FAR_OFF < value / base < FAR_OFF:
                out.append(f"{size} B: {shown_value(value * factor)} {unit or record.unit} is {value / base:.3g} times "
                           f"its history's {shown_value(base * factor)} (median of its last {len(past)} runs)")
    return [out[0] + (f", and {len(out) - 1} more size{'s' if len(out) > 2 else ''} over {FAR_OFF} times off"
                      if len(out) > 1 else "")] if out else []


def _past(points: list[Point], r: Record, size: int, last: int) -> list[float]:
    """The figures of `r`'s step, system and metric at `size` in the last `last` other runs, oldest first."""
    return [p.median for p in points if (p.system, p.suite, p.step, p.size, p.metric) == (r.system, r.suite, r.step,
            size, r.metric) and p.run_id != r.run_id and p.median is not None and p.median > 0][-last:]


def trend_table(points: list[Point]) -> str:
    lines = [f"{'run':28s} {'system':16s} {'suite/step':48s} {'size':>10s} {'figure':>14s} {'unit':6s} verdict"]
    for p in points:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(p.started)) if p.started else "-"
        figure = f"{p.median:.3f}" if p.median is not None else "-"
        lines.append(f"{p.run_id[:28]:28s} {p.system[:16]:16s} {(p.suite + '/' + p.step)[:48]:48s} {p.size:>10d} "
                     f"{figure:>14s} {p.unit:6s} {p.verdict}  ({when})")
    series = {(p.system, p.suite, p.step, p.size) for p in points}
    lines.append(f"{len(points)} figures, {len({p.run_id for p in points})} runs, {len(series)} series")
    return "\n".join(lines) + "\n"


def plot(points: list[Point], fmt: str = "png") -> bytes:
    """One line per step and size: the judged figure over the runs (log scale where it spans decades), as an
    image in `fmt` (a matplotlib format: png, svg, pdf)."""
    from matplotlib.figure import Figure  # matplotlib only when there is a plot

    from commstack.results.markup import mpl_text

    if not points:
        raise HistoryError("nothing to plot: no figures match")
    fig = Figure(figsize=(10, 5))
    ax = fig.subplots()
    series: dict[tuple, list[Point]] = {}
    for p in points:
        series.setdefault((p.suite, p.step, p.size), []).append(p)
    for (suite, step, size), pts in sorted(series.items()):
        factor = shown(pts[0].metric)[2]
        ax.errorbar([time.strftime("%m-%d %H:%M", time.localtime(p.started)) if p.started else str(i)
                     for i, p in enumerate(pts)], [math.nan if p.median is None else p.median * factor for p in pts],
                    yerr=[p.stdev * factor for p in pts], marker="o", capsize=3, label=mpl_text(f"{step} {size} B"))
    ax.set_ylabel(mpl_text(", ".join(sorted({"{} ({})".format(*shown(p.metric)[:2]) for p in points}))))
    ax.set_xlabel("run")
    ax.set_title(mpl_text(", ".join(sorted({p.system for p in points}))))
    ax.legend(fontsize="small")
    fig.autofmt_xdate()
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format=fmt)
    return image.getvalue()


def compare_to_history(run_dir: Path, path: Path, last: int = 10, tolerance: float = 0.05) -> list[Change]:
    """Each step and size of a run against the median and spread of the last `last` earlier runs of the
    same step on the same system."""
    records = read_run(run_dir)
    history = trend(path)
    out: list[Change] = []
    for r in records:
        name = f"{r.suite}/{r.step}"
        if not r.repeats:
            out.append(Change(name, None, None, None, "missing in B"))
            continue
        for size, (value, stdev, _) in r.medians().items():
            past = _past(history, r, size, last)
            if not past:
                out.append(Change(name, size, None, value, "missing in A", metric=r.metric))
                continue
            base = statistics.median(past)
            if not all(math.isfinite(v) and v > 0 for v in (base, value)):
                out.append(Change(name, size, base, value, "invalid", metric=r.metric))
                continue
            higher = METRICS[r.metric].higher_is_better
            change = lambda v: (v - base) / base if higher else (base - v) / v  # noqa: E731 - > 0 is better
            # the history's spread on each side, computed like the change itself, plus twice this run's repeat spread
            noise = 2 * stdev / value
            worse = max(tolerance, max(0.0, *(-change(v) for v in past)) + noise)
            above = max(tolerance, max(0.0, *(change(v) for v in past)) + noise)
            c = change(value)
            kind = "regression" if c < -worse else "better" if c > above else "same"
            out.append(Change(name, size, base, value, kind, metric=r.metric))
    return out
