"""What a person gets from a screen, line by line: the node lines and the summary, the healthy spreads, the leaf
switches' figures, the drain lines, the sender x receiver matrix and its heatmap, screen.json, nodes.txt and the
report page; on the records of the real screens (tests/data/screen) and records made from them
(test_screen_verdict.rec)."""

import json
import math
import struct

import matplotlib.pyplot as plt
import pytest

from commstack.screen import output
from commstack.screen.verdict import attribute
from test_screen import NODES, findings, records
from test_screen_verdict import RULE, SIZE, failing_node5, healthy, rec

DOC = {"run_id": "20261129-010101-000000-abcdef", "system": "local-multinode", "screen": "local", "wall_s": 33.4,
       "exit": 1}


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_node_lines_are_padded_to_the_longest_name():
    f = attribute(["n1", "node10"], {"node10": "drained (x)"}, [], [], {}, RULE)
    assert output.node_lines(f) == ["n1      not-run: no check ran on it", "node10  down: drained (x): not screened"]


def test_the_summary_says_every_finding_in_order():
    records = failing_node5() + [rec("node3", "node6", 2.0), rec("node6", "node3", 2.0),
                                 rec("node1", "node7", 2.0), rec("node7", "node1", 100.0)]
    f = attribute(NODES, {}, [], records, {}, RULE)
    f.blunt["fi_pingpong"] = "spread 47% at 256 KiB: cannot tell a 2x slowdown here; no slowdown at all"
    slow = "osu_bw 256 KiB 0.00200 GB/s vs 0.100 GB/s peer median"
    assert output.summary(f, {"groups": "no leaf switches"}) == [
        "bad nodes: none", "down mid-screen: node5", "bad pairs: node3-node6",
        f"  node3-node6: node3->node6: {slow}; node6->node3: {slow}",
        "suspect pairs (one bad measurement, not called bad): node1-node7",
        "groups: not run: no leaf switches",
        "fi_pingpong: spread 47% at 256 KiB: cannot tell a 2x slowdown here; no slowdown at all"]
    assert output.summary(findings("clean"), {}) == ["bad nodes: none", "bad pairs: none"]


def test_the_spreads_are_each_check_and_size_in_order():
    records = healthy(100.0, n=4) + [rec("node1", "node2", 0.5, check="ucx", metric="latency_us", one_way=False)] * 3
    f = attribute(NODES, {}, [], records + [rec("node1", "node3", 130.0)], {}, RULE)
    assert output.spreads(f) == [
        {"check": "osu_bw", "size": SIZE, "median": 100.0, "mad": 0.0, "spread": 0.0, "count": 5},
        {"check": "ucx", "size": SIZE, "median": 0.5, "mad": 0.0, "spread": 0.0, "count": 3}]
    spread = [p for p in output.spreads(findings("degraded")) if p["check"] == "osu_bw"][0]
    assert (spread["count"], spread["spread"]) == (18, round(spread["mad"] / spread["median"], 4))
    assert spread["spread"] != spread["mad"] / spread["median"]   # rounded to 4 places


def test_a_spread_around_a_median_of_zero_is_none_in_json_and_a_dash_on_the_page(tmp_path):
    """Every figure 0 (a check that moved nothing): MAD / median is no number; screen.json stays JSON."""
    records = [rec("node1", "node2", 0.0), rec("node3", "node4", 0.0), rec("node5", "node6", 0.0)]
    f = attribute(NODES, {}, [], records, {}, RULE)
    assert output.spreads(f)[0]["spread"] is None
    page = output.write(tmp_path, DOC, NODES, f, records, {})
    json.loads((tmp_path / "screen.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert "<td>0 MB/s</td><td>0</td><td>-</td><td>3</td>" in page.read_text()


def test_each_leaf_switch_s_figure_or_why_it_has_none():
    rs = records("degraded")
    leaf = next(r for r in rs if r.tags["screen_phase"] == "switch leaf1")
    failed = leaf.model_copy(update={"verdict": "fail", "reason": "osu_mbw_mr crashed"})
    tags = {**leaf.tags, "screen_phase": "switch leaf3"}
    empty = leaf.model_copy(update={"repeats": [], "reason": "no rows", "tags": tags})
    assert output.group_lines(rs) == ["switch leaf1 (node1, node2, node3, node4): osu_mbw_mr 256 KiB 0.00239 GB/s",
                                      "switch leaf2 (node5, node6, node7, node8): osu_mbw_mr 256 KiB 0.0480 GB/s"]
    assert output.group_lines([failed, empty]) == ["switch leaf1 (node1, node2, node3, node4): osu_mbw_mr crashed",
                                                   "switch leaf3 (node1, node2, node3, node4): no rows"]


def test_drain_lines_carry_the_reason_cut_to_what_scontrol_takes(tmp_path):
    f = findings("degraded")
    f.nodes["node3"].reason = "x" * 300
    (argv,) = output.drain_lines(f)
    assert argv[:4] == ["scontrol", "update", "nodename=node3", "state=drain"]
    assert len(argv[4]) == 250 and argv[4] == ("reason=commstack screen: " + "x" * 300)[:250]
    f.nodes["node3"].reason = "it's slow"   # as a shell line: quoted
    output.write(tmp_path, DOC, NODES, f, [], {})
    assert json.loads((tmp_path / "screen.json").read_text())["drain"] == [
        "scontrol update nodename=node3 state=drain 'reason=commstack screen: it'\"'\"'s slow'"]


def test_the_matrix_is_each_figure_against_the_peers_median_sender_by_receiver():
    """A time's fraction is the median over the figure; a failed pair 0; not measured, no peers or no figure: NaN."""
    lat = dict(one_way=False, check="lat", metric="latency_us")
    records = [rec("node1", "node9", 5.0, **lat), rec("node2", "node5", 1.0), *healthy(10.0, **lat),
               rec("node1", "node2", 20.0, **lat), rec("node3", "node5", None, verdict="fail", **lat),
               rec("node4", "node5", 10.0, verdict="fail", **lat), rec("node6", "node5", 0.0, **lat),
               rec("node8", "node5", 5.0, verdict="not-run", **lat), rec("node7", "node7", 5.0, **lat),
               rec("node7", "node5", 1.0, **lat)]
    f = attribute(NODES, {}, [], records, {}, RULE)
    m, size = output.matrix(NODES, records, "lat", f)
    i = {n: NODES.index(n) for n in NODES}
    assert size == SIZE
    assert m[i["node1"]][i["node2"]] == m[i["node2"]][i["node1"]] == 0.5           # a round trip: both cells
    assert m[i["node3"]][i["node5"]] == m[i["node5"]][i["node3"]] == 0.0           # failed
    assert m[i["node4"]][i["node5"]] == 0.0                                        # failed after its figures
    assert m[i["node7"]][i["node5"]] == 10.0                                       # a figure of 1: 10x as fast
    assert math.isnan(m[i["node6"]][i["node5"]])                                   # a figure of 0
    assert math.isnan(m[i["node8"]][i["node5"]]) and math.isnan(m[i["node7"]][i["node7"]])   # not run; one node
    assert math.isnan(m[i["node2"]][i["node5"]]) and m[i["node6"]][i["node7"]] == 1.0   # osu_bw is not lat
    f.peers.stats.clear()
    m, _ = output.matrix(NODES, records, "lat", f)
    assert math.isnan(m[i["node1"]][i["node2"]]) and m[i["node3"]][i["node5"]] == 0.0
    assert output.matrix(NODES, [rec("node1", "node2", None, verdict="fail", **lat)], "lat", f)[1] is None


@pytest.fixture
def drawn(monkeypatch) -> list:
    """The figures output.heatmap draws, as plt.close gets them (not "all", which choosing a backend closes)."""
    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig) if fig != "all" else None, close(fig)))
    return figures


@pytest.mark.parametrize("n, side", [(2, 2.5 + 0.45 * 2), (7, 2.5 + 0.45 * 7), (8, 2.5 + 0.45 * 8),
                                     (20, 2.5 + 0.45 * 20), (24, 12.0), (25, 12.0), (64, 12.0), (65, 12.0)])
def test_the_heatmap_is_sized_and_labelled_by_its_nodes(drawn, n, side):
    names = [f"n{i}" for i in range(n)]
    m = [[math.nan] * n for _ in range(n)]
    m[0][1], m[1][0] = 0.1, 1.5
    png = output.heatmap(names, m, "osu_bw at 262144 B")
    assert png_size(png) == (int((side + 1.2) * 100), int(side * 100))   # as matplotlib rounds: down
    (fig,) = drawn
    ax, bar = fig.axes
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("osu_bw at 262144 B", "receiver", "sender")
    assert ax.title.get_fontsize() == 10
    assert bar.get_ylabel() == "fraction of the peers' median (dark: slow; pale blue: not measured)"
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == names if n <= 64 else not set(ticks) & set(names)   # past 64 nodes: matplotlib's numbers
    if n <= 64:
        assert [t.get_text() for t in ax.get_yticklabels()] == names
        assert ax.get_xticklabels()[0].get_fontsize() == max(5, 10 - n // 8)
        assert ax.get_yticklabels()[0].get_fontsize() == max(5, 10 - n // 8)
        assert ax.get_xticklabels()[0].get_rotation() == 90
    texts = {(t.get_position(), t.get_text(), t.get_color()) for t in ax.texts}
    assert texts == ({((1, 0), "0.10", "white"), ((0, 1), "1.50", "black")} if n <= 24 else set())
    (image,) = ax.images
    assert image.get_clim() == (0, 1.2) and image.get_array()[1][0] == 1.2   # above the peers: as bright as 1.2
    assert image.cmap.get_bad()[:3] == pytest.approx((0xc9 / 255, 0xd7 / 255, 0xe8 / 255))
    for box in (a.get_tightbbox(fig.canvas.get_renderer()) for a in fig.axes):   # every label inside the image
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1


def test_a_cell_at_0_6_of_the_median_is_written_black(drawn):
    output.heatmap(["a", "b"], [[math.nan, 0.6], [0.59, math.nan]], "t")
    assert {t.get_text(): t.get_color() for t in drawn[0].axes[0].texts} == {"0.60": "black", "0.59": "white"}
    assert drawn[0].axes[0].texts[0].get_fontsize() == 7


def test_what_a_screen_writes(tmp_path):
    fi = dict(check="fi_pingpong", one_way=False)
    records = failing_node5() + healthy(100.0, **fi) + [rec("node3", "node6", 2.0, **fi)]
    for r in records:
        r.tags["screen_phase"] = "pairs"
    no_figures = rec("node1", "node2", None, check="ucx", verdict="fail")
    no_figures.tags["screen_phase"] = "pairs"
    f = attribute(NODES, {"node8": "drained (x)"}, [], records, {}, RULE)
    f.blunt["osu_bw"] = "spread 47% & more"
    f.blind.append("osu_bw")
    page = output.write(tmp_path, DOC, NODES, f, [no_figures, *records], {"groups": "no <leaf> switches"})
    text = (tmp_path / "screen.json").read_text()
    assert text.startswith('{\n  "run_id": ') and text.endswith("\n}\n")   # as `screen --json` prints it
    doc = json.loads(text)
    assert doc["nodes"]["node8"] == {"status": "down", "reason": "drained (x): not screened", "partners": [],
                                     "slow_with": []}
    assert doc["nodes"]["node1"]["partners"] == ["node3", "node4"]
    assert (doc["lost"], doc["bad_nodes"], doc["bad_pairs"], doc["not_run"], doc["blunt"], doc["blind"]) == (
        ["node5"], [], [], {"groups": "no <leaf> switches"}, {"osu_bw": "spread 47% & more"}, ["osu_bw"])
    assert doc["suspect_pairs"] == [{"nodes": ["node3", "node6"], "why": [f.suspect_pairs[("node3", "node6")][0]]}]
    assert doc["peers"] == output.spreads(f) and doc["drain"] == [] and doc["run_id"] == DOC["run_id"]
    assert (tmp_path / "nodes.txt").read_text() == "\n".join(output.node_lines(f) + output.summary(
        f, {"groups": "no <leaf> switches"})) + "\n"
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == [
        "heatmap-fi_pingpong.png", "heatmap-osu_bw.png", "index.html"]   # ucx has no figure: no heatmap
    html = page.read_text()
    assert "<h2>Down mid-screen: node5</h2>" in html and "<li>groups: no &lt;leaf&gt; switches</li>" in html
    assert "<h3>What the spread hides</h3><ul><li>osu_bw: spread 47% &amp; more</li></ul>" in html
    assert "<h2>Not judged by: osu_bw (the spread hides the rule's slowdown)</h2>" in html
    assert "<tr class='down'><td>node5</td><td>down</td>" in html
    assert "<p>screen local, run 20261129-010101-000000-abcdef, 33 s, exit 1</p>" in html
    assert "<h2>Bad nodes: none</h2>" in html and "<h2>Bad pairs: none</h2>" in html
    assert "<td>ucx</td>" not in html   # a check without a figure has no spread row


def test_a_page_without_findings_has_no_empty_sections(tmp_path):
    f = findings("clean")
    html = output.write(tmp_path, DOC, NODES, f, records("clean"), {}).read_text()
    assert "Down mid-screen" not in html and "<h3>Not run</h3>" not in html and "What the spread hides" not in html
    assert "<title>commstack screen 20261129-010101-000000-abcdef</title>" in html
    assert "<h1>commstack screen: local-multinode, 8 nodes</h1>" in html
    assert "<figure><img src='heatmap-osu_bw.png' alt='osu_bw heatmap'><figcaption>osu_bw</figcaption></figure>" \
        in html


def test_above_the_heatmap_bound_the_page_says_why_it_has_none(tmp_path, monkeypatch):
    """n² cells: 65,536 nodes would need some 160 GB; the bound lowered to below the 8 nodes of the records."""
    f, rs = findings("degraded"), records("degraded")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.setattr(output, "HEATMAP_NODES", len(NODES))  # at the bound: drawn
    assert "heatmap-osu_bw.png" in output.write(tmp_path / "a", DOC, NODES, f, rs, {}).read_text()
    monkeypatch.setattr(output, "HEATMAP_NODES", len(NODES) - 1)
    page = output.write(tmp_path / "b", DOC, NODES, f, rs, {}).read_text()
    assert f"No heatmaps above {len(NODES) - 1} nodes: the bad nodes and pairs are above." in page
    assert "<img" not in page and not list((tmp_path / "b" / "report").glob("*.png"))
