"""Doubts about a step's figures (issue 36 item 13): taken on a busy machine (load average, CPU steal), or
100 times off the step's own history without any reference. Real runs of seed 002's all_reduce_perf tables
(test_history.py), the report through `commstack report`."""

import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

from test_history import STEP, add_record, run

from commstack.results.history import FAR_OFF, add_run, default_path
from commstack.results.records import read_run
from commstack.run.doubts import busy, checked, others_load, ranks_here


def test_a_busy_machine_is_named_by_its_load_or_its_steal():
    assert busy({"load1": 6.7, "cpus": 2, "steal": 0.01}) == ("taken on a busy machine (load average 6.7 on 2 CPUs): "
                                                              "its figures may be off")
    assert busy({"load1": 0.5, "cpus": 2, "steal": 0.25}) == ("taken on a busy machine (25% of CPU time stolen): its "
                                                              "figures may be off")
    assert busy({"load1": 2.0, "cpus": 2, "steal": 0.1}) is None  # one runnable task per CPU is not busy


def test_a_figure_far_off_its_history_is_a_warning_without_references(tmp_path, monkeypatch):
    monkeypatch.delenv("COMMSTACK_HISTORY", raising=False)
    for i in range(3):
        add_run(run(tmp_path, f"r{i}", "cscs-nccl-01.txt", 1000.0 + i), default_path(tmp_path))
    (same,) = read_run(run(tmp_path, "same", "cscs-nccl-01.txt", 2000.0))
    (low,) = read_run(run(tmp_path, "low", "cscs-nccl-01.txt", 2000.0))
    low.repeats = [[{**row, low.metric: row[low.metric] / (2 * FAR_OFF)} for row in low.repeats[0]]]
    with checked(same, tmp_path / "same"):
        pass
    assert set(same.machine) >= {"cpus", "load1"} and same.machine["cpus"] >= 1  # this machine, now
    assert [w for w in same.warnings if "history" in w] == []
    with checked(low, tmp_path / "low"):
        pass
    (far,) = [w for w in low.warnings if "history" in w]
    more = sum(row[low.metric] > 0 for row in low.repeats[0]) - 1  # the sizes with a figure above 0
    assert far == (f"64 B: 5e-05 GB/s is 0.005 times its history's 0.01 (median of its last 3 runs), and {more} more "
                   "sizes over 100 times off")
    low.write(tmp_path / "low")
    proc = subprocess.run([sys.executable, "-m", "commstack", "report", str(tmp_path / "low")], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "low" / "report" / "index.html").read_text()
    assert "<h2>Warnings about the figures</h2>" in page
    assert f"<li><code>{STEP}</code>: 64 B: 5e-05 GB/s is 0.005 times its history" in page


def test_a_steps_own_ranks_on_this_machine_do_not_make_it_busy(tmp_path):
    """issue: a long step with as many ranks as CPUs raised the load average at its end to the CPU count by itself.
    Its ranks on this host are taken off the end's load; the start's, before it launched, is taken as it is."""
    (record,) = read_run(run(tmp_path, "own", "cscs-nccl-01.txt", 1000.0))
    cpus = os.cpu_count()
    record.tags, record.nodelist = {**record.tags, "ntasks": 2 * cpus}, [socket.gethostname().split(".")[0], "far"]
    assert ranks_here(record) == cpus  # half its nodes are this host: half its ranks
    record.nodelist = ["compute-1", "compute-2"]
    assert ranks_here(record) == 0  # a cluster's nodes: the login host's load is not theirs
    assert others_load(0.3, cpus + 0.4, cpus) == 0.4  # the end's load was the step's ranks and 0.4 more
    assert others_load(0.3, 1.0, cpus) == 0.3  # a short step: the end's load had not reached its ranks yet
    assert others_load(None, 3.0, 1) == 2.0 and others_load(None, None, 1) is None
    assert busy({"load1": others_load(0.2, cpus + 0.5, cpus), "cpus": cpus}) is None
    record.nodelist = [socket.gethostname().split(".")[0]]
    with checked(record, tmp_path / "own"):
        pass
    assert record.machine["ranks_here"] == 2 * cpus and record.machine["load1"] >= 0  # what was taken off is kept


def figures(d: Path, values: dict[int, float], started: float = 1000.0) -> Path:
    """A run of one all_reduce_perf record of one repeat: `values`, size -> GB/s."""
    add_record(d, STEP, [[{"size": size, "oop_busbw_GBps": value} for size, value in values.items()]], started)
    return d


def doubts(d: Path) -> list[str]:
    """The warnings about the history that the run `d`'s one step gets as it ends."""
    (record,) = read_run(d)
    with checked(record, d):
        pass
    return [w for w in record.warnings if "history" in w]


def test_far_off_starts_at_exactly_100_times_off_either_way_and_counts_the_sizes_after_it(tmp_path, monkeypatch):
    """1/100 and 100 times the history's median are far off, 1/50 is not. After the first far-off size the warning
    counts the others: it said "1 more sizes" for one; nothing follows a lone one."""
    monkeypatch.delenv("COMMSTACK_HISTORY", raising=False)
    for i in range(3):
        add_run(figures(tmp_path / f"r{i}", {8: 100.0, 16: 100.0, 32: 100.0, 64: 100.0}, 1000.0 + i),
                default_path(tmp_path))
    assert doubts(figures(tmp_path / "two", {8: 1.0, 16: 2.0, 32: 10000.0, 64: 100.0})) == [
        "8 B: 1 GB/s is 0.01 times its history's 100 (median of its last 3 runs), and 1 more size over 100 times off"]
    assert doubts(figures(tmp_path / "three", {8: 1.0, 16: 0.5, 32: 10000.0})) == [
        "8 B: 1 GB/s is 0.01 times its history's 100 (median of its last 3 runs), and 2 more sizes over 100 times off"]
    assert doubts(figures(tmp_path / "one", {16: 2.0, 32: 10000.0, 64: 100.0})) == [
        "32 B: 10000.0 GB/s is 100 times its history's 100 (median of its last 3 runs)"]


def test_a_zero_figure_and_a_history_of_zeros_are_no_doubt(tmp_path, monkeypatch):
    """nccl-tests prints 0.00 GB/s for its smallest sizes: a figure of 0 is not far off its history, and a history
    of zeros is no baseline (a figure above 0 against it is neither a warning nor a division by zero)."""
    monkeypatch.delenv("COMMSTACK_HISTORY", raising=False)
    for i in range(3):
        add_run(figures(tmp_path / f"r{i}", {8: 0.0, 16: 100.0}, 1000.0 + i), default_path(tmp_path))
    assert doubts(figures(tmp_path / "new", {8: 5.0, 16: 0.0})) == []


def test_a_history_that_cannot_be_read_or_a_step_without_figures_gets_no_doubt(tmp_path, monkeypatch):
    """The history is read for a step's doubts only where the step took figures, and one it cannot use (here of a newer
    schema) is passed by: the run names it when it adds itself. An empty file at the history's place stays empty
    (opening it as the history would write the schema into it)."""
    monkeypatch.delenv("COMMSTACK_HISTORY", raising=False)
    history = default_path(tmp_path)
    history.write_bytes(b"")
    failed = tmp_path / "failed"
    add_record(failed, STEP, [])  # a step that took no figure
    assert doubts(failed) == [] and history.read_bytes() == b""
    sqlite3.connect(history).execute("PRAGMA user_version = 2")
    assert doubts(figures(tmp_path / "new", {8: 5.0})) == []
