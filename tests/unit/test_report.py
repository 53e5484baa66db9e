"""Reports, plots and compare, built from the seeds' recorded real tables as typed records."""

import csv
import math
import re
import struct
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.text import Text

from commstack.cli.main import main
from commstack.config import load_system
from commstack.paths import TOP
from commstack.results.compare import CompareError, compare, compare_table
from commstack.results.references import load_references
from commstack.tools.osu import parse_osu
from commstack.results.records import Record, RecordError, read_run
from commstack.results.report import NO_PLOT, curves_figure, native_vs_container_figure, write_report

DATA = TOP / "systems" / "references" / "seeds"
ALPS = load_system("alps-gh200")
REFS = load_references(ALPS.references)


def record(results: Path, step: str, seed: str | None, suite: str = "cscs-images", system: str = "alps-gh200",
           repeats: int = 1, verdict: str = "pass", reason: str = "", **tags) -> Record:
    sweep = parse_osu((DATA / (seed or "cscs-osu-01.txt")).read_text())[0]
    metric = "bandwidth_MBps" if "bandwidth_MBps" in sweep.columns else "latency_us"
    tags = {"nodes": 2, "ntasks": 2, "memory": "host", "environment": "osu-mb", **tags}
    rec = Record(run_id=results.name, index=len(list(results.glob('steps/*'))), suite=suite, step=step, system=system, benchmark=sweep.benchmark,
                 tool="osu", metric=metric, unit="MB/s" if metric == "bandwidth_MBps" else "us", tags=tags,
                 repeats=[sweep.rows] * repeats if seed else [], verdict=verdict, reason=reason,
                 nodelist=["nid001", "nid002"], commands=[["srun", "-N2", "--mpi=pmix", sweep.benchmark]])
    rec.write(results)
    return rec


def test_report_from_seed_tables(tmp_path):
    record(tmp_path, "osu_bw-cxi", "cscs-osu-01.txt", cxi_hook=True)
    record(tmp_path, "osu_bw-no-cxi", "cscs-osu-10.txt", environment="osu-mb-no-cxi", cxi_hook=False,
           verdict="degraded", reason="4194304 B: 3121.42 MB/s vs reference 23982.2")
    record(tmp_path, "osu_latency", "cscs-osu-07.txt", cxi_hook=True)
    record(tmp_path, "osu_alltoall", None, verdict="not-run", reason="no OSU micro-benchmarks here")
    page = write_report(tmp_path, REFS, ALPS.node.nic_line_rate_MBps)
    out = tmp_path / "report"
    md = (out / "report.md").read_text()
    pngs = sorted(out.glob("*.png"))
    assert [p.name for p in pngs] == ["osu_bw-host.png", "osu_latency-host.png"]
    for p in pngs:
        img = matplotlib.image.imread(p)
        assert p.stat().st_size > 10_000 and img.shape[0] > 400 and img.shape[1] > 700
    assert "**4 steps: 2 pass, 1 degraded, 1 not-run**" in md  # counts per verdict at the top
    assert "| `osu_alltoall` | not-run | no OSU micro-benchmarks here |" in md  # every step is listed
    assert "| 4194304 | 23.98 | 3.121 |" in md  # seed 000: CXI hook vs none, 4 MiB, in GB/s as plotted
    html = page.read_text()
    assert page.name == "index.html" and html.count("src='data:image/png;base64,") == 2  # self-contained
    assert "<td>not-run</td><td>no OSU micro-benchmarks here</td>" in html
    rows = list(csv.DictReader((out / "rows.csv").open()))
    assert len(rows) == 23 + 23 + 23
    big = [r for r in rows if r["step"] == "osu_bw-cxi" and r["size"] == "4194304"]
    assert float(big[0]["value"]) == 23982.18


def test_report_is_swapped_in_not_rebuilt_in_place(tmp_path):
    record(tmp_path, "osu_bw", "cscs-osu-01.txt")
    first = write_report(tmp_path).resolve()
    second = write_report(tmp_path).resolve()
    assert first != second and second.is_file() and not first.exists()  # the old one went after the swap
    assert (tmp_path / "report").is_symlink()


def test_container_vs_native_report_has_mean_and_error_bars(tmp_path):
    record(tmp_path, "lat-native", "cscs-osu-07.txt", suite="container-vs-native", repeats=3, environment="native")
    record(tmp_path, "lat-image", "cscs-osu-12.txt", suite="container-vs-native", repeats=3)
    write_report(tmp_path)
    assert (tmp_path / "report" / "osu_latency-host.png").stat().st_size > 10_000
    assert "182.4 ± 0 |" in (tmp_path / "report" / "report.md").read_text()  # three identical repeats


def seed_column(seed: str) -> dict[int, float]:
    """size -> the judged figure of a recorded table, as printed."""
    sweep = parse_osu((DATA / seed).read_text())[0]
    metric = "bandwidth_MBps" if "bandwidth_MBps" in sweep.columns else "latency_us"
    return {row["size"]: row[metric] for row in sweep.rows}


def half_widths(bars: ErrorbarContainer) -> tuple[list[float], list[float]]:
    """The error bars' extents from their points: below, above."""
    ends = [(lo, hi) for (_, lo), (_, hi) in bars.lines[2][0].get_segments()]
    ys = bars.lines[0].get_ydata()
    return [y - lo for y, (lo, _) in zip(ys, ends)], [hi - y for y, (_, hi) in zip(ys, ends)]


def shown_x_labels(fig: Figure) -> list[str]:
    """The x tick labels drawn inside the axes' view, as a user reads them."""
    fig.draw_without_rendering()
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    return [t.get_text() for t in ax.get_xticklabels() if lo <= t.get_position()[0] <= hi]


def assert_message_size_axis(ax) -> None:
    """Both plots against message size: log 2 sizes labelled as bytes, K, M or G, a log figure, a grid."""
    assert (ax.get_xscale(), ax.xaxis.get_transform().base, ax.get_yscale()) == ("log", 2, "log")
    assert ax.get_xlabel() == "message size (bytes)"
    label = ax.xaxis.get_major_formatter()  # sizes no seed reaches: 1 B, 1.5 KiB, 1 and 3 GiB, the margin below 1 B
    assert [label(x) for x in (1, 1536, 2 ** 30, 3 * 2 ** 30, 0.5)] == ["1", "1536", "1G", "3G", ""]
    gridlines = [t.gridline for axis in (ax.xaxis, ax.yaxis) for t in axis.get_major_ticks() + axis.get_minor_ticks()]
    assert gridlines and all(g.get_visible() for g in gridlines)
    assert {t.get_fontsize() for t in ax.get_legend().get_texts()} == {8}


@pytest.mark.filterwarnings("error")  # matplotlib warns of nothing: no grid(False) with line properties
def test_the_curves_show_each_repeated_step_its_reference_and_the_nic_line_rate(tmp_path):
    """osu_bibw over two repeats (0.9 and 1.1 times seed 000's table) against its reference and twice
    the NIC line rate: what the user reads off the plot, and the PNG's size."""
    bibw = record(tmp_path, "osu_bibw", "cscs-osu-05.txt", repeats=2, cxi_hook=True)
    bibw.repeats = [[{**r, "bandwidth_MBps": r["bandwidth_MBps"] * f} for r in bibw.repeats[0]] for f in (0.9, 1.1)]
    bibw.write(tmp_path)
    fig = curves_figure([bibw], REFS, ALPS.node.nic_line_rate_MBps, "2026-01-02")
    ax = fig.axes[0]
    assert tuple(fig.get_size_inches()) == (8, 5)
    pars = fig.subplotpars
    assert (pars.left, pars.right, pars.bottom, pars.top) == (0.12, 0.97, 0.1, 0.93)
    assert_message_size_axis(ax)
    assert shown_x_labels(fig) == ["2", "16", "128", "1K", "8K", "64K", "512K", "4M"]
    assert ax.get_ylabel() == "bandwidth (GB/s)"
    assert ax.get_title() == "osu_bibw, host memory — system alps-gh200, suite cscs-images, 2026-01-02"
    assert ax.title.get_fontsize() == 10
    seed = seed_column("cscs-osu-05.txt")
    steps = {c.get_label(): c for c in ax.containers if isinstance(c, ErrorbarContainer)}
    assert list(steps) == ["osu_bibw", "reference osu_bibw-host-inter (-10%/+15%)"]
    step, ref = steps.values()
    assert list(step.lines[0].get_xdata()) == list(seed)
    assert list(step.lines[0].get_ydata()) == pytest.approx([v / 1000 for v in seed.values()])  # the medians, GB/s
    spread = pytest.approx([v / 1000 * 0.1 * math.sqrt(2) for v in seed.values()])  # sd of 0.9 and 1.1 x the median
    assert half_widths(step) == (spread, spread)
    assert step.lines[0].get_marker() == "o" and step.lines[0].get_markersize() == 3
    assert {cap.get_markersize() for cap in step.lines[1]} == {2 * 2}  # capsize 2
    points = [8192, 65536, 1048576, 4194304]
    assert list(ref.lines[0].get_xdata()) == points
    assert list(ref.lines[0].get_ydata()) == pytest.approx([seed[s] / 1000 for s in points])
    assert half_widths(ref) == (pytest.approx([seed[s] / 1000 * 0.10 for s in points]),  # -10%
                                pytest.approx([seed[s] / 1000 * 0.15 for s in points]))  # +15%
    assert (ref.lines[0].get_marker(), ref.lines[0].get_markersize(), ref.lines[0].get_color()) == ("D", 5, "black")
    assert ref.lines[0].get_linestyle() == "None" and {cap.get_markersize() for cap in ref.lines[1]} == {2 * 4}
    (nic,) = [line for line in ax.get_lines() if line.get_label().startswith("NIC")]
    assert nic.get_label() == "NIC line rate x2 (50 GB/s)" and list(nic.get_ydata()) == [50, 50]  # 25000 MB/s x 2
    assert (nic.get_color(), nic.get_linestyle(), nic.get_linewidth()) == ("red", "--", 1)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "NIC line rate x2 (50 GB/s)", "osu_bibw", "reference osu_bibw-host-inter (-10%/+15%)"]
    write_report(tmp_path, REFS, ALPS.node.nic_line_rate_MBps)
    png = (tmp_path / "report" / "osu_bibw-host.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (800, 500)  # 8 x 5 in at 100 dpi


def test_the_curves_of_one_repeat_draw_no_spread_and_a_time_reference_flips_its_tolerance(tmp_path):
    """osu_alltoall, one repeat, a zero and a NaN in it: a line through the drawable figures only, no error
    bars; its reference's tolerance (-20%/+15% for a time) drawn as the times it allows; no line rate."""
    rec = record(tmp_path, "osu_alltoall", "cscs-osu-08.txt", ranks_per_node=4, cxi_hook=True)
    rec.repeats[0][0]["latency_us"] = 0.0
    rec.repeats[0][1]["latency_us"] = float("nan")
    rec.write(tmp_path)
    fig = curves_figure(read_run(tmp_path), REFS, ALPS.node.nic_line_rate_MBps, "2026-01-02")
    ax = fig.axes[0]
    assert_message_size_axis(ax)
    assert ax.get_ylabel() == "latency (µs)"
    assert ax.get_title() == "osu_alltoall, host memory — system alps-gh200, suite cscs-images, 2026-01-02"
    seed = seed_column("cscs-osu-08.txt")
    del seed[1], seed[2]  # 0 and NaN: nothing a log scale can draw
    (line,) = [line for line in ax.get_lines() if line.get_label() == "osu_alltoall"]
    assert list(line.get_xdata()) == list(seed) and list(line.get_ydata()) == list(seed.values())
    assert (line.get_marker(), line.get_markersize()) == ("o", 3)
    (ref,) = ax.containers  # the reference's bars only
    assert ref.get_label() == "reference osu_alltoall-host-2x4 (-15%/+20%)"
    points = [1024, 65536, 1048576]
    assert list(ref.lines[0].get_xdata()) == points
    assert half_widths(ref) == (pytest.approx([seed[s] * 0.15 for s in points]),  # +15% of the time: better
                                pytest.approx([seed[s] * 0.20 for s in points]))  # -20%: worse
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["osu_alltoall", ref.get_label()]


def repeated(results: Path, step: str, seed: str, factors: tuple[float, ...], **tags) -> Record:
    """A seed's table once per repeat, each with every figure times its factor."""
    rec = record(results, step, seed, suite="container-vs-native", repeats=len(factors), **tags)
    rec.repeats = [[{**r, rec.metric: r[rec.metric] * f} for r in rec.repeats[0]] for f in factors]
    rec.write(results)
    return rec


def suptitle(fig: Figure) -> Text:
    (title,) = [t for t in fig.texts if t.get_text() == fig.get_suptitle()]
    return title


def test_a_size_one_repeat_has_no_figure_for_is_drawn_at_the_others_median(tmp_path):
    rec = record(tmp_path, "osu_bw", "cscs-osu-01.txt", repeats=3)
    rec.repeats = [rec.repeats[0], rec.repeats[0], [{**r, "bandwidth_MBps": None} for r in rec.repeats[0]]]
    rec.write(tmp_path)
    (line,) = curves_figure(read_run(tmp_path), None, None, "2026-01-02").axes[0].containers
    seed = seed_column("cscs-osu-01.txt")
    assert list(line.lines[0].get_xdata()) == list(seed)  # a spread of NaN: no bar, the point still drawn
    assert list(line.lines[0].get_ydata()) == pytest.approx([v / 1000 for v in seed.values()])


@pytest.mark.filterwarnings("error")  # matplotlib warns of nothing: no grid(False) with line properties
def test_native_vs_container_on_one_node_count_shows_the_means_and_their_spread(tmp_path):
    """Seed 001's figure for one node count: osu_latency natively over three repeats (0.9, 1 and 1.1 times
    seed 000's table, 0 at 1 B: not drawable) and in the image over three identical ones (0.5 us at 1 B: drawn),
    native first."""
    native = repeated(tmp_path, "lat-native", "cscs-osu-07.txt", (0.9, 1, 1.1), environment="native")
    for rows in native.repeats:
        rows[0]["latency_us"] = 0.0
    native.write(tmp_path)
    image = repeated(tmp_path, "lat-image", "cscs-osu-12.txt", (1, 1, 1))
    for rows in image.repeats:
        rows[0]["latency_us"] = 0.5
    image.write(tmp_path)
    fig = native_vs_container_figure(read_run(tmp_path), "2026-01-02")
    (ax,) = fig.axes
    assert tuple(fig.get_size_inches()) == (8, 5)
    assert_message_size_axis(ax)
    assert shown_x_labels(fig) == ["2", "16", "128", "1K", "8K", "64K", "512K", "4M"]
    assert ax.get_ylabel() == "latency (µs), mean ± sd"
    assert suptitle(fig).get_text() == ("osu_latency on 2 nodes: native vs container — system alps-gh200, suite "
                                        "container-vs-native, 2026-01-02")
    assert suptitle(fig).get_fontsize() == 10
    series = {c.get_label(): c for c in ax.containers}
    assert list(series) == [t.get_text() for t in ax.get_legend().get_texts()] == ["native", "osu-mb"]
    seed = seed_column("cscs-osu-07.txt")
    del seed[min(seed)]
    assert list(series["native"].lines[0].get_xdata()) == list(seed)
    assert list(series["native"].lines[0].get_ydata()) == pytest.approx(list(seed.values()))  # the means
    spread = pytest.approx([v / 10 for v in seed.values()])  # the standard deviation: 0.1 x the mean
    assert half_widths(series["native"]) == (spread, spread)
    image = {**seed_column("cscs-osu-12.txt"), 1: 0.5}
    assert list(series["osu-mb"].lines[0].get_xdata()) == list(image)  # no spread: each point drawn all the same
    assert list(series["osu-mb"].lines[0].get_ydata()) == pytest.approx(list(image.values()))
    assert half_widths(series["osu-mb"]) == ([0] * len(image), [0] * len(image))
    for bars in series.values():
        assert (bars.lines[0].get_marker(), bars.lines[0].get_markersize()) == ("o", 3)
        assert {cap.get_markersize() for cap in bars.lines[1]} == {2 * 3}  # capsize 3
    write_report(tmp_path)
    png = (tmp_path / "report" / "osu_latency-host.png").read_bytes()
    assert struct.unpack(">II", png[16:24]) == (800, 500)  # 8 x 5 in at 100 dpi


def test_native_vs_container_across_node_counts_has_a_panel_per_seed_001_size(tmp_path):
    """osu_alltoall natively and in the image on 2 and 4 nodes: seed 001's message sizes, one panel each, the
    mean against node count; no panel's labels run into another's."""
    for nodes in (2, 4):
        repeated(tmp_path, f"a2a-native-{nodes}", "cscs-osu-08.txt", (1, 1), environment="native", nodes=nodes)
        repeated(tmp_path, f"a2a-image-{nodes}", "cscs-osu-13.txt", (1, 1), nodes=nodes)
    fig = native_vs_container_figure(read_run(tmp_path), "2026-01-02")
    assert [ax.get_title() for ax in fig.axes] == ["1KB messages", "32KB messages", "64KB messages", "1MB messages"]
    native, image = seed_column("cscs-osu-08.txt"), seed_column("cscs-osu-13.txt")
    for ax, size in zip(fig.axes, (1024, 32768, 65536, 1048576)):
        assert [(c.get_label(), list(c.lines[0].get_xdata())) for c in ax.containers] == [
            ("native", [2, 4]), ("osu-mb", [2, 4])]
        assert [list(c.lines[0].get_ydata()) for c in ax.containers] == [[native[size]] * 2, [image[size]] * 2]
    boxes = [ax.get_tightbbox() for ax in fig.axes]  # each panel with its labels: after tight_layout
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]
    assert all(fig.bbox.contains(*box.min) and fig.bbox.contains(*box.max) for box in boxes)
    # what each panel shows: 2 x 2 panels of 6 x 4 inches, node counts on a log-2 axis, labelled, gridded
    assert list(fig.get_size_inches()) == [12, 8] and suptitle(fig).get_fontsize() == 10
    assert "osu_alltoall: native vs container" in fig.get_suptitle()
    for ax in fig.axes:
        assert (ax.get_xscale(), list(ax.get_xticks()), [t.get_text() for t in ax.get_xticklabels()]) == \
            ("log", [2, 4], ["2", "4"])
        assert (ax.get_xlabel(), ax.get_ylabel(), ax.title.get_fontsize()) == ("nodes", "latency (µs), mean ± sd", 9)
        assert ax.xaxis.get_gridlines()[0].get_visible() and ax.get_legend().get_texts()[0].get_fontsize() == 8
        assert [(c.lines[0].get_marker(), c.lines[0].get_markersize(), c.lines[1][0].get_markersize())
                for c in ax.containers] == [("o", 4, 6), ("o", 4, 6)]  # a cap is 2 x capsize 3


@pytest.mark.parametrize("sizes, titles, inches", [
    ((8, 64, 512), ["8B messages", "64B messages", "512B messages", ""], [12, 8]),
    ((8,), ["8B messages"], [6, 4])])
def test_native_vs_container_of_sizes_seed_001_does_not_show_takes_its_own(tmp_path, sizes, titles, inches):
    """Where a benchmark ran none of seed 001's sizes, up to four of its own (every quarter), each a panel; an odd
    count leaves the last panel's place blank, one size is one panel."""
    for nodes in (2, 4):
        for step, seed in ((f"lat-native-{nodes}", "cscs-osu-07.txt"), (f"lat-image-{nodes}", "cscs-osu-12.txt")):
            rec = repeated(tmp_path, step, seed, (1, 1), environment="native" if "native" in step else "osu-mb",
                           nodes=nodes)
            rec.repeats = [[r for r in rows if r["size"] in sizes] for rows in rec.repeats]
            rec.write(tmp_path)
    fig = native_vs_container_figure(read_run(tmp_path), "2026-01-02")
    assert [ax.get_title() for ax in fig.axes] == titles and list(fig.get_size_inches()) == inches
    assert [ax.get_visible() for ax in fig.axes] == [bool(t) for t in titles]


def test_compare_flags_the_no_cxi_run_as_a_regression(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, "osu_bw", "cscs-osu-01.txt")
    record(b, "osu_bw", "cscs-osu-10.txt")
    changes = {c.size: c for c in compare(a, b)}
    assert changes[4194304].change == "regression" and round(changes[4194304].ratio, 3) == 0.13
    table = compare_table(list(changes.values())).splitlines()
    assert len(table) == 1 + 23 + 1 and table[0].split() == ["step", "size", "A", "B", "unit", "B/A", "change"]
    # in the report's unit, with it (issue 36 item 14: MB/s figures under no unit, where the report shows GB/s)
    assert table[-2].split() == ["cscs-images/osu_bw", "4194304", "23.98", "3.121", "GB/s", "0.130", "regression"]
    assert table[-1] == "23 points, 23 regressions, 23 differences"
    assert {c.change for c in compare(a, a)} == {"same"}
    assert compare_table(compare(a, a)).splitlines()[-1] == "23 points, 0 regressions, 0 differences"


def test_compare_latency_lower_is_better(tmp_path):
    """osu_latency without the CXI hook (3.34 -> 29.13 us at 8 B) is a regression, and back is better."""
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, "osu_latency", "cscs-osu-07.txt")
    record(b, "osu_latency", "cscs-osu-12.txt")
    worse = {c.size: c for c in compare(a, b)}
    assert (worse[8].a, worse[8].b, worse[8].change) == (3.34, 29.13, "regression")
    assert {c.change for c in worse.values()} == {"regression"}
    assert {c.change for c in compare(b, a)} == {"better"}


def test_steps_on_one_side_or_neither_do_not_hide_the_steps_after_them(tmp_path):
    """Steps sorted before a regressed one: only in A, run on neither side, rows in A only."""
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, "osu_a1-only-in-a", "cscs-osu-01.txt")
    for run in (a, b):
        record(run, "osu_a2-not-run", None, verdict="not-run", reason="no OSU micro-benchmarks here")
    record(a, "osu_a3-rows-in-a", "cscs-osu-01.txt")
    record(b, "osu_a3-rows-in-a", None, verdict="fail", reason="osu_bw: step timed out after 4 s")
    record(a, "osu_bw", "cscs-osu-01.txt")
    cut = record(b, "osu_bw", "cscs-osu-10.txt")
    cut.repeats = [cut.repeats[0][1:]]  # no row at 1 B: a size missing before the regressed ones
    cut.write(b)
    changes = [(c.step.split("/")[1], c.size, c.change, c.detail) for c in compare(a, b)]
    assert changes[:5] == [
        ("osu_a1-only-in-a", None, "missing in B", ""),
        ("osu_a2-not-run", None, "not run in A nor B", "B: not-run: no OSU micro-benchmarks here"),
        ("osu_a3-rows-in-a", None, "missing in B", "B: fail: osu_bw: step timed out after 4 s"),
        ("osu_bw", 1, "missing in B", ""), ("osu_bw", 2, "regression", "")]
    assert [(c.a, c.b) for c in compare(a, b) if c.step.endswith("osu_bw")][:2] == [(0.95, None), (1.9, 0.32)]
    assert changes[-1] == ("osu_bw", 4194304, "regression", "") and len(changes) == 3 + 23
    b_only = [(c.step, c.change, c.detail) for c in compare(b, a) if c.step.endswith("osu_a3-rows-in-a")]
    assert b_only == [("cscs-images/osu_a3-rows-in-a", "missing in A", "A: fail: osu_bw: step timed out after 4 s")]


def slower(results: Path, factors: list[float], **tags) -> Record:
    """osu_bw's seed table once per repeat, each with every figure times its factor."""
    rec = record(results, "osu_bw", "cscs-osu-01.txt", repeats=len(factors), **tags)
    rec.repeats = [[{**r, "bandwidth_MBps": r["bandwidth_MBps"] * f} for r in rec.repeats[0]] for f in factors]
    rec.write(results)
    return rec


@pytest.mark.parametrize("factors,tolerance,refs,change", [
    ([0.97] * 3, None, None, "same"),              # 3 % down: within the default 5 %
    ([0.92] * 3, None, None, "regression"),        # 8 % down
    ([0.92] * 3, 0.10, None, "same"),              # --tolerance 0.10
    ([0.92] * 3, None, REFS, "same"),              # the reference's lower tolerance, -10 %
    ([0.86, 0.92, 0.98], None, None, "same"),      # 8 % down, repeats spread 6.5 %: twice that is noise
    ([0.79, 0.85, 0.91], None, None, "regression"),  # 15 % down, spread 7.1 %: beyond twice the noise
])
def test_the_threshold_is_the_tolerance_or_twice_the_noise(tmp_path, factors, tolerance, refs, change):
    a, b = tmp_path / "a", tmp_path / "b"
    slower(a, [1.0, 1.0, 1.0], cxi_hook=True)
    slower(b, factors, cxi_hook=True)
    assert {c.change for c in compare(a, b, tolerance, refs) if c.size >= 8192} == {change}


def test_compare_reports_a_step_or_size_missing_on_either_side(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, "osu_bw", "cscs-osu-01.txt")
    record(a, "osu_latency", "cscs-osu-07.txt")
    cut = record(b, "osu_bw", "cscs-osu-01.txt")
    cut.repeats = [cut.repeats[0][:-1]]  # the last size is gone
    cut.write(b)
    changes = compare(a, b)
    assert [(c.step, c.size, c.change) for c in changes if c.difference] == [
        ("cscs-images/osu_bw", 4194304, "missing in B"), ("cscs-images/osu_latency", None, "missing in B")]


def test_compare_never_calls_nan_or_zero_the_same(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, "osu_bw", "cscs-osu-01.txt")
    bad = record(b, "osu_bw", "cscs-osu-01.txt")
    bad.repeats[0][0]["bandwidth_MBps"] = 0.0
    bad.repeats[0][1]["bandwidth_MBps"] = float("nan")
    bad.write(b)
    verdicts = [c.change for c in compare(a, b)]
    assert verdicts[:2] == ["invalid", "invalid"] and set(verdicts[2:]) == {"same"}


def test_compare_refuses_other_metrics_and_systems(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    record(a, "osu_bw", "cscs-osu-01.txt")
    record(b, "osu_bw", "cscs-osu-07.txt")  # a latency table under the same step
    with pytest.raises(CompareError, match="A measures bandwidth_MBps in MB/s, B latency_us in us"):
        compare(a, b)
    record(c, "osu_bw", "cscs-osu-01.txt", system="local")
    with pytest.raises(CompareError, match=r"different systems: \['alps-gh200'\] vs \['local'\]"):
        compare(a, c)


def test_truncated_record_is_a_named_error_not_a_traceback(tmp_path):
    path = record(tmp_path, "osu_bw", "cscs-osu-01.txt").write(tmp_path)
    path.write_text(path.read_text()[:200])
    with pytest.raises(RecordError, match="record.json: not a commstack record"):
        read_run(tmp_path)
    with pytest.raises(RecordError, match="no step records"):
        (tmp_path / "empty").mkdir() or read_run(tmp_path / "empty")


def test_a_failed_report_leaves_the_previous_one(tmp_path, monkeypatch):
    record(tmp_path, "osu_bw", "cscs-osu-01.txt")
    good = write_report(tmp_path).resolve()
    record(tmp_path, "x", "cscs-osu-01.txt")

    def broken(*args):
        raise RuntimeError("the plot fails half-way through the report")
    monkeypatch.setattr("commstack.results.report.curves_figure", broken)
    with pytest.raises(RuntimeError):
        write_report(tmp_path)
    assert (tmp_path / "report" / "index.html").resolve() == good and good.is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".report-") and p != good.parent]


def test_every_error_class_has_a_kind_and_records_store_it(tmp_path):
    import commstack.cli.main  # noqa: F401 - imports every module, so every error class exists
    from commstack.errors import CommstackError, StepTimeoutError
    from commstack.run.lifecycle import failure, settle

    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)
    kinds = {c.__name__: c.kind for c in subclasses(CommstackError)}
    assert {"empty", "unknown-format", "bad-number", "truncated", "validation-failed", "crashed", "timed-out",
            "node-failure"} <= set(kinds.values())
    assert (kinds["StepTimeoutError"], kinds["NodeFailureError"], kinds["StepCrashedError"]) == (
        "timed-out", "node-failure", "crashed")
    assert kinds["RecordError"] == "record" and kinds["SpackInstallError"] == "spack-install"
    rec = record(tmp_path, "osu_bw", None)
    settle(rec, failure(StepTimeoutError("osu_bw: step timed out after 4 s", "raw"), []))
    assert (rec.verdict, rec.error_kind) == ("fail", "timed-out")
    rec.write(tmp_path)
    write_report(tmp_path)
    assert "| `osu_bw` | fail (timed-out) | osu_bw: step timed out after 4 s (raw output: raw) |" in (
        tmp_path / "report" / "report.md").read_text()


def commstack_compare(*args) -> subprocess.CompletedProcess:
    """`commstack compare` as a user types it."""
    return subprocess.run([sys.executable, "-m", "commstack", "compare", *map(str, args)], capture_output=True,
                          text=True)


@pytest.fixture
def compare_cli(capsys):
    """`commstack compare` in this process: the command's code path, where coverage and perf/mutation.py see it."""
    def run(*args) -> subprocess.CompletedProcess:
        rc = main(["compare", *map(str, args)])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["commstack", "compare", *map(str, args)], rc, out, err)
    return run


def test_compare_cli_b_lacks_a_step_or_sizes(tmp_path, compare_cli):
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, "osu_bw", "cscs-osu-01.txt")
    record(a, "osu_latency", "cscs-osu-07.txt")
    record(b, "osu_bw", "cscs-osu-01.txt")
    p = compare_cli(a, b)
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.search(r"^cscs-images/osu_latency +all +- +- +-  missing in B$", p.stdout, re.M), p.stdout
    cut = record(b, "osu_latency", "cscs-osu-07.txt")
    cut.repeats = [cut.repeats[0][:-2]]
    cut.write(b)
    p = compare_cli(a, b)
    assert p.returncode == 1 and "2 differences" in p.stdout
    assert re.search(r"^cscs-images/osu_latency +2097152 +\S+ +- +µs +-  missing in B$", p.stdout, re.M), p.stdout


def test_compare_cli_a_worse_verdict_is_a_difference(tmp_path, compare_cli):
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, "osu_bw", "cscs-osu-01.txt")
    record(b, "osu_bw", "cscs-osu-01.txt", verdict="fail", reason="osu_bw: data validation failed at 8 B")
    p = compare_cli(a, b)
    assert p.returncode == 1, p.stdout
    assert "cscs-images/osu_bw" in p.stdout and "verdict pass -> fail: osu_bw: data validation failed at 8 B" in p.stdout
    assert "1 differences" in p.stdout


def test_compare_cli_not_run_on_both_sides_is_not_missing(tmp_path, compare_cli):
    a, b = tmp_path / "a", tmp_path / "b"
    for run in (a, b):
        record(run, "osu_bw", "cscs-osu-01.txt")
        record(run, "osu_alltoall", None, verdict="not-run", reason="no OSU micro-benchmarks here")
    p = compare_cli(a, b)
    assert p.returncode == 3, p.stdout + p.stderr
    assert re.search(r"^cscs-images/osu_alltoall +all +- +- +-  not run in A nor B$", p.stdout, re.M), p.stdout
    assert "missing" not in p.stdout and "0 differences, 1 step not run in A nor B" in p.stdout
    assert compare_cli(a, b, "--allow-not-run").returncode == 0


def test_compare_cli_refuses_other_metrics_nan_and_a_truncated_record(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, "osu_bw", "cscs-osu-01.txt")
    record(b, "osu_bw", "cscs-osu-07.txt")  # a latency table under the same step
    p = commstack_compare(a, b)
    assert p.returncode == 2 and "osu_bw: A measures bandwidth_MBps in MB/s, B latency_us in us" in p.stderr
    bad = record(b, "osu_bw", "cscs-osu-01.txt")
    bad.repeats[0][3]["bandwidth_MBps"] = float("nan")
    bad.write(b)
    p = commstack_compare(a, b)
    assert p.returncode == 1 and re.search(r"^cscs-images/osu_bw +8 +0.00761 +nan +GB/s +nan  invalid$", p.stdout, re.M), p.stdout
    path = bad.write(b)
    path.write_text(path.read_text()[:300])
    p = commstack_compare(a, b)
    assert p.returncode == 2 and "record.json: not a commstack record" in p.stderr and "Traceback" not in p.stderr


def test_a_planned_step_without_a_record_is_reported_not_run(tmp_path):
    """The runner writes the plan (every expanded step) before its first step; a record lost after
    that (run killed, disk trouble) still shows in read_run, the report and compare."""
    from commstack.config import load_suite
    from commstack.run.binaries import Binaries
    from commstack.run.runner import Run
    from commstack.run.steps import expand

    system = load_system("local-multinode")
    steps = [s for s in expand(load_suite("nersc10"), system) if s.not_run]  # the device steps: nothing launches
    run = Run(system, tmp_path, Binaries(build=False))
    run.planned = steps
    for s in steps:
        run.execute(s)
    lost = tmp_path / "steps" / f"nersc10--{steps[2].id}" / "record.json"
    lost.unlink()
    records = read_run(tmp_path)
    assert [r.step for r in records] == [s.id for s in steps]
    assert records[2].verdict == "not-run" and records[2].reason == "no record written (run interrupted or lost)"
    write_report(tmp_path)
    md = (tmp_path / "report" / "report.md").read_text()
    assert f"**{len(steps)} steps: {len(steps)} not-run**" in md
    assert f"| `{steps[2].id}` | not-run | no record written (run interrupted or lost) |" in md  # its own reason


def test_a_reason_several_steps_give_is_said_once_with_its_code_rendered(tmp_path):
    """issue 36 items 11-12: each not-run row repeated the whole reason, backticks showed literally, and the
    caption claimed a standard deviation over one repeat."""
    why = "no OSU micro-benchmarks here: run `bin/commstack setup`, or give `--osu-prefix PREFIX`"
    for step in ("osu_a", "osu_b", "osu_c"):
        record(tmp_path, step, None, verdict="not-run", reason=why)
    record(tmp_path, "osu_bw", "cscs-osu-01.txt", verdict="fail", reason="`osu_bw` crashed")
    page = write_report(tmp_path, REFS).read_text()
    md = (tmp_path / "report" / "report.md").read_text()
    assert page.count("no OSU micro-benchmarks here") == 1 and md.count("no OSU micro-benchmarks here") == 1
    assert "<td>not-run</td><td><a href='#reason-1'>reason 1</a></td>" in page
    assert ("<li id='reason-1'>no OSU micro-benchmarks here: run <code>bin/commstack setup</code>, or give "
            "<code>--osu-prefix PREFIX</code> (3 steps: <code>osu_a</code>, <code>osu_b</code>, <code>osu_c</code>)"
            "</li>") in page
    assert "| `osu_a` | not-run | [reason 1](#reasons-several-steps-give) |" in md
    assert ("1. no OSU micro-benchmarks here: run `bin/commstack setup`, or give `--osu-prefix PREFIX` (3 steps: "
            "`osu_a`, `osu_b`, `osu_c`)") in md
    assert "<td><code>osu_bw</code> crashed</td>" in page and "| `osu_bw` crashed |" in md  # said once: inline
    assert "one repeat per step: its figure, no spread." in page and "standard deviation" not in page


def test_steps_without_rows_compare_their_verdicts_and_the_table_says_why(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for run in (a, b):
        record(run, "osu_a-fails", None, verdict="fail", reason="osu_bw: step timed out after 4 s")
        record(run, "osu_b-not-run", None, verdict="not-run", reason="no OSU micro-benchmarks here")
        record(run, "osu_c-not-run", None, verdict="not-run", reason="no OSU micro-benchmarks here")
    record(a, "osu_d-was-fine", "cscs-osu-01.txt")
    timed_out = record(b, "osu_d-was-fine", None, verdict="fail", reason="osu_bw: step timed out after 4 s")
    timed_out.error_kind = "timed-out"
    timed_out.write(b)
    record(a, "osu_e-not-run-now", None, verdict="fail", reason="crashed")
    record(b, "osu_e-not-run-now", None, verdict="not-run", reason="no OSU micro-benchmarks here")
    changes = compare(a, b)
    assert [(c.step.split("/")[1], c.change, c.detail) for c in changes] == [
        ("osu_a-fails", "same", "B: fail: osu_bw: step timed out after 4 s"),
        ("osu_b-not-run", "not run in A nor B", "B: not-run: no OSU micro-benchmarks here"),
        ("osu_c-not-run", "not run in A nor B", "B: not-run: no OSU micro-benchmarks here"),
        ("osu_d-was-fine", "missing in B", "B: fail (timed-out): osu_bw: step timed out after 4 s"),
        ("osu_e-not-run-now", "worse verdict", "B: not-run: no OSU micro-benchmarks here")]
    table = compare_table(changes).splitlines()
    assert table[1].endswith("  same - B: fail: osu_bw: step timed out after 4 s")
    assert table[2].endswith("  not run in A nor B")  # the detail says nothing more there
    assert table[-1] == "5 points, 0 regressions, 2 differences, 2 steps not run in A nor B"
    cut = {c.size: c for c in compare(a, a)}
    assert cut[None].change == "same"
    a_only = record(tmp_path / "c", "osu_d-was-fine", "cscs-osu-01.txt")
    a_only.repeats = [a_only.repeats[0][1:]]
    a_only.write(tmp_path / "c")
    (first,) = [c for c in compare(tmp_path / "c", a) if c.size == 1]
    assert (first.a, first.b, first.change) == (None, 0.95, "missing in A")


def test_a_change_of_exactly_the_tolerance_is_the_same_and_latency_unchanged_is_the_same(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    base = record(a, "osu_bw", "cscs-osu-01.txt")
    base.repeats = [[{**r, "bandwidth_MBps": 8.0} for r in base.repeats[0]]]
    base.write(a)
    moved = record(b, "osu_bw", "cscs-osu-01.txt")
    moved.repeats = [[{**r, "bandwidth_MBps": 10.0 if r["size"] < 1024 else 6.0} for r in moved.repeats[0]]]
    moved.write(b)
    assert {c.change for c in compare(a, b, 0.25)} == {"same"}  # +25 % and -25 %, binary fractions: exact
    assert {c.change for c in compare(a, b, 0.24)} == {"better", "regression"}
    lat = tmp_path / "lat"
    record(lat, "osu_latency", "cscs-osu-07.txt")
    assert {c.change for c in compare(lat, lat)} == {"same"}


def test_a_nan_in_one_of_several_repeats_is_invalid_not_a_traceback(tmp_path):
    """statistics.stdev fails on NaN (AttributeError on Python 3.11): compare and the report kept a traceback."""
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, "osu_bw", "cscs-osu-01.txt", repeats=2)
    bad = record(b, "osu_bw", "cscs-osu-01.txt", repeats=2)
    bad.repeats = [bad.repeats[0], [dict(r) for r in bad.repeats[1]]]
    bad.repeats[1][0]["bandwidth_MBps"] = float("nan")
    bad.write(b)
    changes = compare(a, b)
    assert [c.change for c in changes][:2] == ["invalid", "same"]
    write_report(b)
    assert "| `osu_bw` |" in (b / "report" / "report.md").read_text()


def test_a_reason_two_steps_give_is_said_once(tmp_path):
    for step in ("osu_a", "osu_b"):
        record(tmp_path, step, None, verdict="not-run", reason="no OSU micro-benchmarks here")
    write_report(tmp_path)
    md = (tmp_path / "report" / "report.md").read_text()
    assert md.count("no OSU micro-benchmarks here") == 1
    assert "1. no OSU micro-benchmarks here (2 steps: `osu_a`, `osu_b`)" in md


def png_size(path: Path) -> tuple[int, int]:
    """A PNG's width and height in pixels, from its header."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_a_benchmark_no_step_of_which_a_log_scale_can_draw_has_no_plot(tmp_path):
    """osu_bw at 0 or NaN: no plot, said so; osu_bibw below 1 MB/s, and osu_latency with one of three
    repeats lost at every size: plotted."""
    bw = record(tmp_path, "osu_bw", "cscs-osu-01.txt")
    bw.repeats = [[{**r, "bandwidth_MBps": 0.0 if i % 2 else None} for i, r in enumerate(bw.repeats[0])]]
    bw.write(tmp_path)
    bibw = record(tmp_path, "osu_bibw", "cscs-osu-05.txt")
    bibw.repeats = [[{**r, "bandwidth_MBps": 0.5} for r in bibw.repeats[0]]]
    bibw.write(tmp_path)
    lat = record(tmp_path, "osu_latency", "cscs-osu-07.txt", repeats=3)
    lat.repeats[2] = [{**r, "latency_us": None} for r in lat.repeats[2]]
    lat.write(tmp_path)
    page = write_report(tmp_path).read_text()
    md = (tmp_path / "report" / "report.md").read_text()
    assert sorted(p.name for p in (tmp_path / "report").glob("*.png")) == ["osu_bibw-host.png", "osu_latency-host.png"]
    assert f"## osu_bw, host memory\n\n{NO_PLOT}\n" in md
    assert "## osu_bibw, host memory\n\n![osu_bibw host](osu_bibw-host.png)\n" in md
    assert page.count(f"<p>{NO_PLOT}</p>") == 1 and page.count("src='data:image/png;base64,") == 2


@pytest.mark.parametrize("environments,nodes,pixels", [
    (("native", "osu-mb"), (2, 4), (1200, 800)),   # seed 001's panels, 2 x 2
    (("osu-mb",), (2, 4), (800, 500)),              # one environment: the curves
    (("native", "osu-mb"), (2, None), (800, 500)),  # a step without a node count: the curves
])
def test_container_vs_native_draws_seed_001_panels_for_several_environments_on_node_counts(
        tmp_path, environments, nodes, pixels):
    for environment in environments:
        for n in nodes:
            record(tmp_path, f"a2a-{environment}-{n}", "cscs-osu-08.txt", suite="container-vs-native",
                   environment=environment, nodes=n)
    write_report(tmp_path)
    assert png_size(tmp_path / "report" / "osu_alltoall-host.png") == pixels


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="open descriptors listed in /proc")
def test_a_report_leaves_no_descriptor_open(tmp_path):
    record(tmp_path, "osu_bw", "cscs-osu-01.txt")
    before = len(list(Path("/proc/self/fd").iterdir()))
    write_report(tmp_path)
    write_report(tmp_path)
    assert len(list(Path("/proc/self/fd").iterdir())) == before
