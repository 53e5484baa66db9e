"""The run report's page as `commstack report RUN_DIR` writes it: its sections, tables, counts, links to the PNGs
and the PNGs' titles (issue 37: what the mutation run of results/report.py showed no test reading)."""

import os
import time
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from test_diagnosis import FI_PINGPONG, OSU_BW_NO_CXI, step

from commstack.cli.main import main
from commstack.results import report
from commstack.results.records import Record
from commstack.results.report import NO_PLOT, _bytes

DATE = "2024-05-01"


def rec(run: Path, name: str, values: list | None = None, repeats: int = 1, suite: str = "cscs-images",
        benchmark: str = "osu_latency", metric: str = "latency_us", system: str = "testbox", verdict: str = "pass",
        sizes: tuple[int, ...] = (1024, 4096), **fields) -> Record:
    """A record written into `run`: `values` at `sizes` (one per size) in each of `repeats`, or a list of
    them per repeat (None: a figure that was not finite)."""
    unit = {"latency_us": "us", "bandwidth_MBps": "MB/s"}[metric]
    per_repeat = values if values and isinstance(values[0], list) else [values] * repeats if values else []
    fields = {"tags": {"nodes": 2, "memory": "host"}, **fields}
    r = Record(run_id=run.name, index=len(list(run.glob("steps/*"))), suite=suite, step=name, system=system,
               benchmark=benchmark, tool="osu", metric=metric, unit=unit, verdict=verdict,
               repeats=[[{"size": s, metric: v} for s, v in zip(sizes, vs)] for vs in per_repeat], **fields)
    r.write(run)
    return r


def commstack_report(run: Path) -> tuple[str, str]:
    """report.md and index.html as `commstack report RUN_DIR` writes them, dated DATE (the run directory's mtime)."""
    t = time.mktime(time.strptime(f"{DATE} 12:00", "%Y-%m-%d %H:%M"))
    os.utime(run, (t, t))
    assert main(["report", str(run)]) in (0, 1, 3)  # passed, some step did not pass, only not-run ones
    return (run / "report" / "report.md").read_text(), (run / "report" / "index.html").read_text()


def pngs(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "report").glob("*.png"))


@pytest.fixture
def figures(monkeypatch) -> list[dict]:
    """What each PNG the report draws shows as text: its title over all, its panels' titles and y labels."""
    drawn = []

    class Recording(Figure):
        def savefig(self, *args, **kwargs):
            shown = [ax for ax in self.axes if ax.get_visible()]
            drawn.append({"suptitle": self._suptitle.get_text() if self._suptitle else None,
                          "titles": [ax.get_title() for ax in shown], "ylabels": [ax.get_ylabel() for ax in shown]})
            super().savefig(*args, **kwargs)

    monkeypatch.setattr(report, "Figure", Recording)
    return drawn


def test_the_x_ticks_name_whole_binary_units_and_leave_the_margin_below_one_byte_blank():
    sizes = [2 ** 30, 3 * 2 ** 30, 2 ** 31, 2 ** 20, 5 * 2 ** 20, 2 ** 21, 2 ** 10, 3 * 2 ** 10, 2 ** 11, 1536,
             2 ** 20 + 2 ** 10, 1, 7, 0.5, 0]
    assert [_bytes(x) for x in sizes] == ["1G", "3G", "2G", "1M", "5M", "2M", "1K", "3K", "2K", "1536",
                                          "1025K", "1", "7", "", ""]


def test_a_reason_two_steps_give_is_numbered_once_and_each_list_and_table_is_closed(tmp_path):
    for name in ("osu_a", "osu_b"):
        rec(tmp_path, name, verdict="not-run", reason="no OSU micro-benchmarks here")
    rec(tmp_path, "osu_c", verdict="fail", reason="osu_c crashed")
    md, page = commstack_report(tmp_path)
    assert md.count("no OSU micro-benchmarks here") == 1 and page.count("no OSU micro-benchmarks here") == 1
    assert "| `osu_b` | not-run | [reason 1](#reasons-several-steps-give) |" in md
    assert "\n1. no OSU micro-benchmarks here (2 steps: `osu_a`, `osu_b`)" in md
    assert ("<td>fail</td><td>osu_c crashed</td><td></td><td><code></code></td><td></td></tr>\n</table>\n"
            "<h2>Reasons several steps give</h2>\n<ol>\n") in page
    assert "(2 steps: <code>osu_a</code>, <code>osu_b</code>)</li>\n</ol>\n" in page


def test_the_lowest_layer_at_fault_comes_after_the_title_and_counts_and_the_by_layer_table_is_closed(tmp_path):
    step(tmp_path, "fi_pingpong", FI_PINGPONG)
    step(tmp_path, "osu_bw", OSU_BW_NO_CXI)
    md, page = commstack_report(tmp_path)
    lines = md.split("\n")
    assert lines[0] == "# commstack report: stack on alps-gh200"
    assert lines[2].startswith(f"{DATE}, run `{tmp_path.name}`: **2 steps: 1 no-reference, 1 degraded**. ")
    assert lines[4:7] == ["## Lowest layer at fault", "", "- `stack/osu_bw` on node1, node2: osu_bw reaches 3.12 "
                          "GB/s at 4 MiB (13 % of the reference, 24.0 GB/s); fi_pingpong on the same nodes reaches "
                          "0.728 GB/s: the fabric"]
    assert lines[8].startswith("| step | verdict |")
    body = page[page.index("<body>\n") + len("<body>\n"):].split("\n")
    assert body[0] == "<h1>commstack report: stack on alps-gh200</h1>"
    assert body[1].startswith(f"<p>{DATE}, run <code>{tmp_path.name}</code>: <b>2 steps: 1 no-reference, 1 degraded")
    assert body[2:5] == ["<h2>Lowest layer at fault</h2><ul class='fault'>", "<li><code>stack/osu_bw</code> on node1, "
                         "node2: osu_bw reaches 3.12 GB/s at 4 MiB (13 % of the reference, 24.0 GB/s); fi_pingpong on "
                         "the same nodes reaches 0.728 GB/s: the fabric</li>", "</ul>"]
    assert body[5].startswith("<table><tr><th>step</th><th>verdict</th>")
    assert ("<td class='degraded'>degraded</td><td>3.12 GB/s at 4 MiB</td></tr>\n</table>\n"
            "<h2>fi_pingpong, host memory</h2>") in page


def test_the_steps_table_shows_a_steps_first_command_and_no_section_without_its_content(tmp_path):
    first, then = ["srun", "-N2", "osu_latency", "-i", "1"], ["srun", "-N2", "osu_latency"]
    rec(tmp_path, "osu_a", verdict="not-run", reason="no OSU", commands=[first, then])
    md, page = commstack_report(tmp_path)
    assert "| `osu_a` | not-run | no OSU |  | `srun -N2 osu_latency -i 1` |  |" in md
    assert "<td><code>srun -N2 osu_latency -i 1</code></td>" in page
    for section in ("Warnings about the figures", "Binaries", "Notes", "Reasons several steps give", "By layer"):
        assert section not in md and section not in page


def test_warnings_binaries_and_notes_have_their_sections(tmp_path):
    rec(tmp_path, "osu_a", [5.0, 6.0], warnings=["the machine was busy: load 3.5 besides the step's ranks"],
        binary={"path": "/opt/osu/libexec/osu_latency", "from": "COMMSTACK_OSU_PREFIX"},
        notes=[f"line {i}: note {i}" for i in range(1, 21)])
    rec(tmp_path, "osu_b", [5.0, 6.0], notes=[f"line {i}: note {i}" for i in range(1, 22)])
    md, page = commstack_report(tmp_path)
    assert ("\n\n## Warnings about the figures\n\n- `osu_a`: the machine was busy: load 3.5 besides the step's ranks\n"
            in md)
    assert ("<h2>Warnings about the figures</h2><ul class='fault'>\n<li><code>osu_a</code>: the machine was busy: "
            "load 3.5 besides the step&#x27;s ranks</li>\n</ul>") in page
    assert ("\n\n## Binaries\n\n| step | binary | from |\n|---|---|---|\n"
            "| `osu_a` | `/opt/osu/libexec/osu_latency` | COMMSTACK_OSU_PREFIX |\n") in md
    assert ("<h2>Binaries</h2>\n<table><tr><th>step</th><th>binary</th><th>from</th></tr>\n<tr><td><code>osu_a</code>"
            "</td><td><code>/opt/osu/libexec/osu_latency</code></td><td>COMMSTACK_OSU_PREFIX</td></tr>\n</table>\n"
            "<h2>Notes: known launcher and runtime lines</h2>\n") in page
    twenty = "\n".join(f"line {i}: note {i}" for i in range(1, 21))
    more = "... 1 more in cscs-images--osu_b/record.json"  # 21 notes: 20 shown, the record holds every one
    assert (f"\n\n## Notes: known launcher and runtime lines\n\n`osu_a`:\n\n```\n{twenty}\n```\n\n"
            f"`osu_b`:\n\n```\n{twenty}\n{more}\n```\n") in md
    assert (f"<p><code>osu_a</code>:</p><pre>{twenty}</pre>\n<p><code>osu_b</code>:</p><pre>{twenty}\n{more}</pre>"
            in page)
    assert md.count(" more in ") == 1 and page.count(" more in ") == 1


def test_a_benchmark_is_plotted_only_where_a_log_scale_can_draw_a_figure(tmp_path):
    """Zero figures, and medians that overflow to infinity, draw nothing: no PNG, and the section says so; figures
    below 1 are drawn, and so is a median whose spread is not finite (a repeat without a figure)."""
    rec(tmp_path, "zero", [0.0, 0.0], benchmark="osu_latency")
    rec(tmp_path, "half", [0.5, 0.25], benchmark="osu_bw", metric="bandwidth_MBps")
    rec(tmp_path, "overflow", [1.7e308, 1.7e308], repeats=2, benchmark="osu_bibw", metric="bandwidth_MBps")
    rec(tmp_path, "one-lost", [[5.0, 6.0], [5.5, 6.5], [None, None]], benchmark="osu_alltoall")
    md, page = commstack_report(tmp_path)
    assert pngs(tmp_path) == ["osu_alltoall-host.png", "osu_bw-host.png"]
    assert f"## osu_bibw, host memory\n\n{NO_PLOT}\n" in md and f"## osu_latency, host memory\n\n{NO_PLOT}\n" in md
    assert "## osu_bw, host memory\n\n![osu_bw host](osu_bw-host.png)\n" in md and md.count(NO_PLOT) == 2
    assert "## osu_alltoall, host memory\n\n![osu_alltoall host](osu_alltoall-host.png)\n" in md
    assert page.count(f"<p>{NO_PLOT}</p>") == 2 and page.count("<img alt=") == 2


def test_a_benchmarks_table_its_caption_and_the_details_of_the_steps_that_did_not_pass(tmp_path):
    rec(tmp_path, "two", [[10.0, 20.0], [12.0, 20.0]], detail="every size within its reference")
    rec(tmp_path, "slow", [40.0, 80.0], verdict="degraded", reason="1024 B: 40 us", detail="1024 B: 40 us vs 10")
    md, page = commstack_report(tmp_path)
    assert ("| size (B) | two | slow |\n|---:|---:|---:|\n| 1024 | 11 ± 1.414 | 40 |\n| 4096 | 20 ± 0 | 80 |\n\n"
            "latency in µs; median over 1/2 repeats (± standard deviation where a step has more than one).\n\n"
            "```\n1024 B: 40 us vs 10\n```\n") in md
    assert ("<tr><td>1024</td><td>11 ± 1.414</td><td>40</td></tr><tr><td>4096</td><td>20 ± 0</td><td>80</td></tr>"
            "</table>\n<p>latency in µs; median over 1/2 repeats") in page
    assert "<pre>1024 B: 40 us vs 10</pre>" in page
    assert "within its reference" not in md and "within its reference" not in page  # a pass: no details


def test_groups_whose_file_names_meet_get_a_png_each(tmp_path):
    rec(tmp_path, "gpu-a", [5.0, 6.0], tags={"nodes": 2, "memory": "gpu 0"})
    rec(tmp_path, "gpu-b", [5.0, 6.0], tags={"nodes": 2, "memory": "gpu_0"})
    md, page = commstack_report(tmp_path)
    assert pngs(tmp_path) == ["osu_latency-gpu_0-1.png", "osu_latency-gpu_0.png"]
    assert "## osu_latency, gpu 0 memory\n\n![osu_latency gpu 0](osu_latency-gpu_0.png)\n" in md
    assert "## osu_latency, gpu_0 memory\n\n![osu_latency gpu_0](osu_latency-gpu_0-1.png)\n" in md


def test_container_vs_native_draws_environments_against_each_other_only_where_it_can(tmp_path, figures):
    """Seed 001's figure for a container-vs-native benchmark with two environments whose steps name their node
    count; any other benchmark gets the curves."""
    cvn = "container-vs-native"
    for env in ("native", "sarus"):
        rec(tmp_path, f"lat-{env}", [5.0, 6.0], suite=cvn, tags={"nodes": 2, "environment": env})
        rec(tmp_path, f"bw-{env}", [5.0, 6.0], suite="cscs-images", tags={"nodes": 2, "environment": env})
    rec(tmp_path, "a2a-native", [5.0, 6.0], suite=cvn, benchmark="osu_alltoall",
        tags={"nodes": 2, "environment": "native"})
    rec(tmp_path, "a2a-sarus", [5.0, 6.0], suite=cvn, benchmark="osu_alltoall", tags={"environment": "sarus"})
    rec(tmp_path, "bibw-native", [5.0, 6.0], suite=cvn, benchmark="osu_bibw",
        tags={"nodes": 2, "environment": "native"})
    md, page = commstack_report(tmp_path)
    assert len(figures) == 4 and len(pngs(tmp_path)) == 4
    title = f"— system testbox, suite {cvn}, {DATE}"
    assert figures[0] == {"suptitle": None, "titles": [f"osu_alltoall, host memory {title}"],
                          "ylabels": ["latency (µs)"]}  # a step without its node count
    assert figures[1] == {"suptitle": None, "titles": [f"osu_bibw, host memory {title}"],
                          "ylabels": ["latency (µs)"]}  # one environment
    assert figures[2] == {"suptitle": f"osu_latency on 2 nodes: native vs container {title}", "titles": [""],
                          "ylabels": ["latency (µs), mean ± sd"]}
    assert figures[3] == {"suptitle": None, "titles": [f"osu_latency, host memory — system testbox, suite "
                                                       f"cscs-images, {DATE}"], "ylabels": ["latency (µs)"]}


def test_container_vs_native_on_several_node_counts_shows_seed_001s_message_sizes(tmp_path, figures):
    sizes = (512, 1024, 4096, 32768, 65536, 1048576, 4194304)
    for env in ("native", "sarus"):
        for nodes in (2, 4, 8):
            rec(tmp_path, f"a2a-{env}-{nodes}", [float(s) for s in sizes], suite="container-vs-native",
                benchmark="osu_alltoall", sizes=sizes, tags={"nodes": nodes, "environment": env})
    commstack_report(tmp_path)
    [drawn] = figures
    assert drawn["suptitle"] == f"osu_alltoall: native vs container — system testbox, suite container-vs-native, {DATE}"
    assert drawn["titles"] == ["1KB messages", "32KB messages", "64KB messages", "1MB messages"]


def test_a_benchmarks_table_is_in_its_plots_unit(tmp_path, figures):
    """Steps of one benchmark that judged different metrics (records of another version): the table, like the
    plot, shows the first step's."""
    rec(tmp_path, "lat", [5.0, 6.0])
    rec(tmp_path, "bw", [5000.0, 6000.0], metric="bandwidth_MBps")
    md, page = commstack_report(tmp_path)
    assert figures[0]["ylabels"] == ["latency (µs)"]
    assert "\nlatency in µs; one repeat per step: its figure, no spread.\n" in md


def test_a_report_leaves_no_descriptor_open_and_is_on_disk_before_it_is_swapped_in(tmp_path, monkeypatch):
    """`commstack run` writes a report after every suite in one process: each closes what it opened; the new
    report's directory is synced before the `report` link names it (no empty report after a crash)."""
    rec(tmp_path, "osu_a", [5.0, 6.0])
    events = []
    fsync, swap_link = os.fsync, report.swap_link

    def synced(fd):
        events.append(("fsync", os.fstat(fd).st_ino))
        fsync(fd)

    def swapped(dir_fd, link, target, shown):
        events.append(("swap", os.stat(target, dir_fd=dir_fd).st_ino))
        return swap_link(dir_fd, link, target, shown)

    monkeypatch.setattr(os, "fsync", synced)
    monkeypatch.setattr(report, "swap_link", swapped)
    commstack_report(tmp_path)  # matplotlib keeps the fonts of its first figure open
    fds = sorted(os.listdir("/proc/self/fd"))
    commstack_report(tmp_path)
    assert sorted(os.listdir("/proc/self/fd")) == fds
    swaps = [i for i, e in enumerate(events) if e[0] == "swap"]
    assert len(swaps) == 2
    for at in swaps:
        assert ("fsync", events[at][1]) in events[:at]


def test_a_plots_title_names_every_system_its_steps_ran_on(tmp_path, figures):
    """Steps of one benchmark from two systems in a run (the page's head names both): the plot's title too, not
    the first step's alone."""
    rec(tmp_path, "lat-a", [5.0, 6.0], system="beta")
    rec(tmp_path, "lat-b", [5.0, 6.0], system="alpha")
    md, page = commstack_report(tmp_path)
    assert md.startswith("# commstack report: cscs-images on alpha, beta\n")
    assert figures[0]["titles"] == [f"osu_latency, host memory — system alpha, beta, suite cscs-images, {DATE}"]
