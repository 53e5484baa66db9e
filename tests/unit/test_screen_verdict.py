"""The screen's verdict at its boundaries: a figure just inside and just outside `slower_by` and `mads`, evidence one
below and at the rule's, a failed record among the peers, a facts problem alone, the directions a node is slow in,
and a spread too wide to judge. The records are a real osu_bw record of an 8-node screen (tests/data/screen) with
its figure, nodes, sender and verdict set per case."""

import math

import pytest

from commstack.results.records import Record
from commstack.screen import output
from commstack.screen.spec import Rule
from commstack.screen.verdict import Peers, attribute, good, suspects
from test_screen import DATA, NODES

TEMPLATE = Record.model_validate_json((DATA / "degraded" / "screen-pairs--osu_bw--node3-node1-r3.json").read_text())
SIZE = 262144


def rec(a: str, b: str, value: float | None, one_way: bool = True, verdict: str = "pass", check: str = "osu_bw",
        metric: str = "bandwidth_MBps") -> Record:
    """`check` between a and b (a sends, where one-way) at `value`; None: no figure."""
    tags = {**TEMPLATE.tags, "screen_check": check}
    if one_way:
        tags["screen_from"] = a
    unit = {"bandwidth_MBps": "MB/s", "latency_us": "us"}[metric]
    rows = [] if value is None else [{"size": SIZE, metric: value}]
    return TEMPLATE.model_copy(update={"nodelist": [a, b], "tags": tags, "verdict": verdict, "metric": metric,
                                       "unit": unit, "repeats": [rows], "step": f"{check}--{a}-{b}"})


#: pairs of healthy nodes: every node but node5 meets two or more partners in each direction
HEALTHY = [("node1", "node3"), ("node2", "node4"), ("node1", "node4"), ("node2", "node3"), ("node6", "node7"),
           ("node7", "node8"), ("node6", "node8"), ("node3", "node4")]


def healthy(value: float = 100.0, n: int = 16, **kw) -> list[Record]:
    """n healthy figures at `value`, both ways round the HEALTHY pairs (none with node5)."""
    pairs = [p for a, b in HEALTHY for p in ((a, b), (b, a))]
    return [rec(*pairs[i % len(pairs)], value, **kw) for i in range(n)]


RULE = Rule(evidence=2, slower_by=0.5, mads=3)


@pytest.mark.parametrize("value, slow", [(50.01, False), (50.0, False), (49.99, True)])
def test_a_rate_is_slow_only_below_the_rule_s_fraction_of_the_median(value, slow):
    peers = Peers.of(healthy(100.0))
    assert (peers.slow(rec("node1", "node2", value), RULE) is not None) is slow


@pytest.mark.parametrize("value, slow", [(19.99, False), (20.0, False), (20.01, True)])
def test_a_time_is_slow_only_above_the_median_over_one_less_the_fraction(value, slow):
    peers = Peers.of(healthy(10.0, metric="latency_us", one_way=False))
    r = rec("node1", "node2", value, one_way=False, metric="latency_us")
    assert (peers.slow(r, RULE) is not None) is slow


@pytest.mark.parametrize("value, slow", [(80.01, False), (80.0, False), (79.99, True)])
def test_a_figure_is_slow_only_beyond_mads_of_the_spread(value, slow):
    """Peers 95 and 105 around 100 (MAD 5); mads 4: 20 below the median is the line, slower_by 18 % inside it."""
    peers = Peers.of([rec("node7", "node8", v) for v in (95, 95, 95, 100, 105, 105, 105)])
    rule = Rule(evidence=2, slower_by=0.18, mads=4)
    assert peers.stats[("osu_bw", SIZE)].mad == 5
    assert (peers.slow(rec("node1", "node2", value), rule) is not None) is slow


def test_fewer_than_three_figures_judge_nothing():
    peers = Peers.of(healthy(100.0, n=2))
    assert peers.slow(rec("node1", "node2", 1.0), RULE) is None
    assert Peers.of(healthy(100.0, n=3)).slow(rec("node1", "node2", 1.0), RULE) is not None


def test_a_failed_or_not_run_record_first_among_the_peers_leaves_the_others_counted():
    records = [rec("node1", "node2", None, verdict="fail"), rec("node1", "node2", None, verdict="not-run"),
               *healthy(100.0, n=5)]
    spread = Peers.of(records).stats[("osu_bw", SIZE)]
    assert (spread.median, spread.count) == (100.0, 5)


@pytest.mark.parametrize("relative, told", [(0.16, None), (0.17, "only 2.04x or worse"), (0.34, "no slowdown at all")])
def test_a_spread_that_hides_the_rule_s_slowdown_says_what_it_can_tell(relative, told):
    """slower_by 0.5, mads 3: 3 MADs inside 50 % (3 x 0.16 = 0.48) tell a 2x slower link; 3 x 0.17 = 0.51 only
    1/(1 - 0.51) = 2.04x or worse, which node5 at 1 % still is; from 3 x 0.34 past zero, nothing."""
    lo, hi = 100 * (1 - relative), 100 * (1 + relative)
    records = [r.model_copy(update={"repeats": [[{"size": SIZE, "bandwidth_MBps": v}]]}) for r, v in
               zip(healthy(n=11), (lo, lo, lo, 100, 100, 100, 100, 100, hi, hi, hi))]
    records += [rec("node5", p, 1.0) for p in ("node1", "node2")]  # the median and MAD stay 100 and 100 x relative
    f = attribute(NODES, {}, [], records, {}, RULE)
    assert (f.bad_nodes == ["node5"]) is (told != "no slowdown at all")
    if told is None:
        assert f.blunt == {}
    else:
        assert f.blunt["osu_bw"] == f"spread {relative:.0%} at 256 KiB: cannot tell a 2x slowdown here; {told}"
        assert f"osu_bw: {f.blunt['osu_bw']}" in output.summary(f, {})


def partners_of_node5(value_out: float, value_in: float, rt: float | None = None) -> list[Record]:
    """node5 with node1 and node2: osu_bw both ways, and a round trip where `rt` is given."""
    out = [*healthy(100.0)]
    for p in ("node1", "node2"):
        out += [rec("node5", p, value_out), rec(p, "node5", value_in)]
        if rt is not None:
            out.append(rec("node5", p, rt, one_way=False, check="fi_pingpong"))
    return out + healthy(100.0, check="fi_pingpong", one_way=False)


@pytest.mark.parametrize("out_, in_, said", [(2.0, 100.0, "slow sending"), (100.0, 2.0, "slow receiving"),
                                              (2.0, 2.0, "slow both ways")])
def test_a_node_is_named_in_the_direction_it_is_slow(out_, in_, said):
    f = attribute(NODES, {}, [], partners_of_node5(out_, in_, rt=20.0), {}, RULE)
    assert f.bad_nodes == ["node5"] and not f.bad_pairs
    assert f.nodes["node5"].reason.startswith(f"{said}: osu_bw 256 KiB ")
    assert f.nodes["node5"].reason.endswith("(2 of 2 partners)")


def test_a_round_trip_alone_cannot_tell_the_direction():
    f = attribute(NODES, {}, [], partners_of_node5(100.0, 100.0, rt=2.0), {}, RULE)
    assert f.nodes["node5"].reason.startswith("slow (round trip): fi_pingpong 256 KiB ")
    assert f.nodes["node5"].slow_in == ["round trip"]


@pytest.mark.parametrize("evidence, status", [(2, "bad"), (3, "suspect")])
def test_evidence_at_the_rule_names_a_node_and_one_below_does_not(evidence, status):
    rule = RULE.model_copy(update={"evidence": evidence})
    f = attribute(NODES, {}, [], partners_of_node5(2.0, 100.0), {}, rule)
    assert f.nodes["node5"].status == status
    if status == "suspect":
        assert f.nodes["node5"].reason.endswith("; 2 bad measurements, 3 needed")
        assert suspects(f) == ["node5"]


def test_a_node_slow_with_one_partner_of_two_is_not_bad_and_the_link_is():
    records = healthy(100.0) + [rec("node5", "node1", 2.0), rec("node1", "node5", 2.0),
                                rec("node5", "node2", 100.0), rec("node2", "node5", 100.0)]
    f = attribute(NODES, {}, [], records, {}, RULE)
    assert f.bad_nodes == []
    assert f.bad_pairs == {("node1", "node5"): ["node5->node1: osu_bw 256 KiB 0.00200 GB/s vs 0.100 GB/s peer median",
                                                "node1->node5: osu_bw 256 KiB 0.00200 GB/s vs 0.100 GB/s peer median"]}
    assert f.nodes["node5"].reason == "link to node1 slow" and f.nodes["node2"].status == "ok"
    assert suspects(f) == [] and good(f) == ["node2", "node3", "node4", "node6", "node7", "node8", "node1", "node5"]


@pytest.mark.parametrize("evidence, status", [(1, "bad"), (2, "suspect")])
def test_a_facts_problem_alone_counts_against_its_node(evidence, status):
    f = attribute(NODES, {}, [], healthy(100.0), {"node3": "no tcp provider"}, RULE.model_copy(
        update={"evidence": evidence}))
    assert f.nodes["node3"].status == status
    assert "facts: no tcp provider (the fabric)" in f.nodes["node3"].reason


def test_the_heatmap_is_sender_by_receiver():
    records = partners_of_node5(2.0, 100.0)
    f = attribute(NODES, {}, [], records, {}, RULE)
    m, size = output.matrix(NODES, records, "osu_bw", f)
    i5, i1 = NODES.index("node5"), NODES.index("node1")
    assert size == SIZE and m[i5][i1] == pytest.approx(0.02) and m[i1][i5] == pytest.approx(1.0)
    assert m[NODES.index("node6")][NODES.index("node7")] == 1.0 and math.isnan(m[NODES.index("node6")][NODES.index("node5")])
