"""The screen's verdict at its boundaries: a figure just inside and just outside `slower_by` and `mads`, evidence one
below and at the rule's, a failed record among the peers, a facts problem alone, the directions a node is slow in,
and a spread too wide to judge. The records are a real osu_bw record of an 8-node screen (tests/data/screen) with
its figure, nodes, sender and verdict set per case."""

import math

import pytest

from commstack.results.records import Record
from commstack.screen import output
from commstack.screen.run import Outcome
from commstack.screen.spec import Rule
from commstack.screen.verdict import Peers, attribute, good, headline, sender_of, suspects, why_bad
from test_screen import DATA, NODES

TEMPLATE = Record.model_validate_json((DATA / "degraded" / "screen-pairs--osu_bw--node3-node1-r3.json").read_text())
SIZE = 262144


def rec(a: str, b: str, value: float | None, one_way: bool = True, verdict: str = "pass", check: str = "osu_bw",
        metric: str = "bandwidth_MBps") -> Record:
    """`check` between a and b (a sends, where one-way) at `value`; None: no figure."""
    tags = {k: v for k, v in TEMPLATE.tags.items() if k != "screen_from"} | {"screen_check": check}
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
    1/(1 - 0.51) = 2.04x or worse, which node5 at 1 % still is, but the others it cannot clear; from 3 x 0.34 past
    zero, nothing."""
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
    # a check that cannot tell the rule's slowdown clears nobody: every node it alone measured and did not find
    # bad is unjudged, not ok
    assert f.blind == ([] if told is None else ["osu_bw"])
    assert {n: v.status for n, v in f.nodes.items() if n != "node5"} == dict.fromkeys(
        set(NODES) - {"node5"}, "ok" if told is None else "unjudged")
    if told is not None:
        assert f.nodes["node1"].reason == "osu_bw: the spread hides the rule's slowdown here"
        assert output.summary(f, {})[-1] == ("not judged by osu_bw: its spread hides the rule's slowdown, so no node "
                                             "or pair it measured is cleared by it")


def test_a_node_a_telling_check_measured_is_judged_beside_a_blind_one():
    """fi_pingpong's spread reaches past zero (blind); osu_bw, tight, measured node1 to node4: they are ok,
    node5, measured by fi_pingpong alone, unjudged; the screen exits 3, nothing being bad."""
    fi = dict(check="fi_pingpong", one_way=False)
    wide = [r.model_copy(update={"repeats": [[{"size": SIZE, "bandwidth_MBps": v}]]})
            for r, v in zip(healthy(n=7, **fi), (30, 30, 30, 100, 170, 170, 170))]
    tight = healthy(100.0, n=4)
    f = attribute(NODES, {}, [], [*wide, *tight, rec("node5", "node6", 100.0, **fi)], {}, RULE)
    assert f.blind == ["fi_pingpong"] and "osu_bw" not in f.blunt
    touched = {n for r in tight for n in r.nodelist}
    assert {n: v.status for n, v in f.nodes.items() if n in touched} == dict.fromkeys(touched, "ok")
    assert f.nodes["node5"].status == "unjudged"
    assert Outcome(NODES, f, {}, []).exit == 3
    assert Outcome(NODES, attribute(NODES, {}, [], tight, {}, RULE), {}, []).exit == 0


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


def spread_of(values, check="osu_bw", metric="bandwidth_MBps"):
    """Records of `check` at `values`, one a pair (round trips where a time)."""
    one_way = metric == "bandwidth_MBps"
    return [rec(*HEALTHY[i % len(HEALTHY)], v, one_way=one_way, check=check, metric=metric)
            for i, v in enumerate(values)]


def test_a_median_of_zero_has_no_spread_and_a_median_below_one_has_one():
    assert Peers.of(spread_of([0.0, 0.0, 0.0])).stats[("osu_bw", SIZE)].relative == math.inf
    assert Peers.of(spread_of([0.4, 0.5, 0.6])).stats[("osu_bw", SIZE)].relative == pytest.approx(0.2)


def test_a_time_against_peers_of_zero_is_not_slow():
    peers = Peers.of(spread_of([0.0, 0.0, 0.0], "fi_pingpong", "latency_us"))
    assert peers.slow(rec("node1", "node2", 5.0, one_way=False, check="fi_pingpong", metric="latency_us"), RULE) \
        is None


@pytest.mark.parametrize("values, told", [
    ((7, 7, 7, 10, 10, 10, 10, 10, 13, 13, 13), None),                   # 30 %: 3 MADs 1.9x, inside 2x
    ((6, 6, 6, 10, 10, 10, 10, 10, 14, 14, 14), "only 2.2x or worse"),   # 40 %: 3 MADs 2.2x
])
def test_a_time_s_spread_hides_a_slowdown_of_one_plus_its_mads(values, told):
    records = spread_of(values, "fi_pingpong", "latency_us")
    blunt = Peers.of(records).blunt(records, RULE)
    assert blunt == ({} if told is None else
                     {"fi_pingpong": f"spread {0.3 if told is None else 0.4:.0%} at 256 KiB: cannot tell a 2x "
                                     f"slowdown here; {told}"})
    # the same spread of a rate reaches past 2x: 1 / (1 - 3 x 30 %) = 10x; 3 x 40 % past zero
    rates = spread_of([10 * v for v in values])
    assert Peers.of(rates).blunt(rates, RULE)["osu_bw"].endswith("only 10x or worse" if told is None else
                                                                 "no slowdown at all")


def test_mads_that_reach_exactly_to_zero_tell_no_slowdown_of_a_rate():
    records = spread_of((75, 75, 75, 100, 100, 100, 100, 100, 125, 125, 125))   # MAD 25: 4 MADs are the median
    rule = Rule(evidence=2, slower_by=0.5, mads=4)
    assert Peers.of(records).blunt(records, rule) == {
        "osu_bw": "spread 25% at 256 KiB: cannot tell a 2x slowdown here; no slowdown at all"}


def test_every_check_s_spread_is_told_whatever_comes_first():
    """A record without figures first, a failed one (not among the peers), a check twice: each check once."""
    wide = (10, 10, 10, 100, 100, 100, 100, 100, 190, 190, 190)
    records = [rec("node1", "node2", None), rec("node1", "node2", 1.0, check="ucx", verdict="fail"),
               *spread_of(wide), *spread_of(wide, "fi_pingpong", "latency_us")]
    assert sorted(Peers.of(records).blunt(records, RULE)) == ["fi_pingpong", "osu_bw"]


def test_a_check_is_judged_at_its_largest_size_of_a_rate_and_smallest_of_a_time():
    rows = [{"size": 8, "latency_us": 1.0, "bandwidth_MBps": 1.0}, {"size": SIZE, "latency_us": 9.0,
                                                                    "bandwidth_MBps": 9.0}]
    bw = rec("node1", "node2", 1.0).model_copy(update={"repeats": [rows]})
    lat = rec("node1", "node2", 1.0, metric="latency_us").model_copy(update={"repeats": [rows]})
    assert (headline(bw), headline(lat), headline(rec("node1", "node2", None))) == (SIZE, 8, None)


def test_who_sent_is_a_node_of_the_pair_or_nobody():
    assert sender_of(rec("node1", "node2", 1.0)) == "node1"
    assert sender_of(rec("node1", "node2", 1.0, one_way=False)) is None
    other = rec("node1", "node2", 1.0)
    other.tags["screen_from"] = "node9"
    assert sender_of(other) is None


def test_a_failed_or_degraded_measurement_says_so():
    failed = rec("node1", "node2", None, verdict="fail").model_copy(update={"reason": "osu_bw exited 1"})
    degraded = rec("node1", "node2", 50.0, verdict="degraded").model_copy(update={"reason": "below reference"})
    silent = rec("node1", "node2", 1.0, verdict="not-run")
    peers = Peers.of(healthy(100.0))
    assert why_bad(failed, peers, RULE) == "osu_bw failed: osu_bw exited 1"
    assert why_bad(degraded, peers, RULE) == "osu_bw degraded: below reference"
    assert why_bad(silent, peers, RULE) is None
    assert why_bad(rec("node1", "node2", 100.0), peers, RULE) is None


def test_a_node_slow_with_its_only_partner_in_a_role_is_not_bad_the_link_is():
    records = healthy(100.0) + [rec("node5", "node1", 2.0), rec("node1", "node5", 2.0)]
    f = attribute(NODES, {}, [], records, {}, RULE)
    five = f.nodes["node5"]
    assert (five.status, five.slow_in, five.partners, five.slow_with) == ("ok", ["sending", "receiving"], ["node1"],
                                                                          ["node1"])
    assert five.line(6) == "node5   ok: link to node1 slow" and f.nodes["node1"].reason == "link to node5 slow"
    assert list(f.bad_pairs) == [("node1", "node5")] and suspects(f) == ["node5"]
    assert "node5" not in good(f)   # slow with every partner it met: no good partner for a confirmation


def test_a_facts_problem_counts_with_the_slow_figures():
    """Slow sending to 2 partners and a facts problem: 3 bad measurements, as the rule's evidence asks."""
    rule = RULE.model_copy(update={"evidence": 3})
    f = attribute(NODES, {}, [], partners_of_node5(2.0, 100.0), {"node5": "no tcp provider"}, rule)
    assert f.nodes["node5"].status == "bad" and f.nodes["node5"].reason.startswith("slow sending: osu_bw 256 KiB ")
    f = attribute(NODES, {}, [], partners_of_node5(2.0, 100.0), {"node3": "no tcp provider"}, rule)
    assert f.nodes["node5"].reason.endswith("(2 of 2 partners); 2 bad measurements, 3 needed")


NODE_RECORD = Record.model_validate_json((DATA / "degraded" / "screen-per-node--pingpong-intra-cpu--node3.json")
                                         .read_text())


def test_a_node_failing_on_its_own_lowest_layer_first():
    failed = NODE_RECORD.model_copy(update={"verdict": "fail", "reason": "exit 1"})
    check = failed.tags["screen_check"]
    f = attribute(NODES, {}, [failed], healthy(100.0), {"node3": "no tcp provider"}, RULE)
    assert f.nodes["node3"].line(5) == "node3  fails on its own: facts: no tcp provider (the fabric); 1 more"
    f = attribute(NODES, {}, [failed], healthy(100.0), {}, RULE.model_copy(update={"evidence": 1}))
    assert f.nodes["node3"].reason == f"fails on its own: {check} failed: exit 1 (MPI)"
    unknown = failed.model_copy(update={"tool": "no-such-tool"})
    f = attribute(NODES, {}, [unknown], healthy(100.0), {}, RULE)
    assert f.nodes["node3"].reason == f"{check} failed: exit 1 (its layer); 1 bad measurement, 2 needed"
    nowhere = failed.model_copy(update={"nodelist": []})
    assert attribute(NODES, {}, [nowhere], healthy(100.0), {}, RULE).nodes["node3"].status == "ok"


def test_a_node_no_check_ran_on_is_said_so():
    ran = NODE_RECORD.model_copy(update={"nodelist": ["node5"]})
    silent = NODE_RECORD.model_copy(update={"nodelist": ["node5"], "verdict": "not-run"})
    assert attribute(NODES, {}, [], healthy(100.0), {}, RULE).nodes["node5"].line(5) == \
        "node5  not-run: no check ran on it"
    assert attribute(NODES, {}, [silent], healthy(100.0), {}, RULE).nodes["node5"].status == "not-run"
    assert attribute(NODES, {}, [ran], healthy(100.0), {}, RULE).nodes["node5"].line(5) == "node5  ok"


def test_a_measurement_of_one_node_twice_or_not_run_is_no_pair_s():
    records = healthy(100.0) + [rec("node5", "node5", 2.0), rec("node5", "node1", 2.0, verdict="not-run")]
    f = attribute(NODES, {}, [], records, {}, RULE)
    assert f.nodes["node5"].status == "not-run" and not f.bad_pairs and not f.suspect_pairs


def test_a_slow_round_trip_pair_is_shown_without_a_direction_and_one_slow_figure_is_a_suspect():
    records = healthy(100.0, check="fi_pingpong", one_way=False) + healthy(100.0) + [
        rec("node1", "node2", 2.0, one_way=False, check="fi_pingpong"), rec("node1", "node2", 100.0),
        rec("node3", "node6", 2.0)]
    f = attribute(NODES, {}, [], records, {}, RULE.model_copy(update={"evidence": 1}))
    assert f.bad_pairs == {("node1", "node2"): ["fi_pingpong 256 KiB 0.00200 GB/s vs 0.100 GB/s peer median"],
                           ("node3", "node6"): ["node3->node6: osu_bw 256 KiB 0.00200 GB/s vs 0.100 GB/s peer median"]}
    f = attribute(NODES, {}, [], records, {}, RULE)
    assert list(f.suspect_pairs) == [("node1", "node2"), ("node3", "node6")] and not f.bad_pairs
    assert "suspect pairs (one bad measurement, not called bad): node1-node2, node3-node6" in output.summary(f, {})


def failing_node5(kind: str | None = "node-failure", last_kind: str | None = "node-failure") -> list[Record]:
    """node5 failed with node1 and node2, each way; the last failure of `last_kind`."""
    out = healthy(100.0)
    fails = [(a, b) for p in ("node1", "node2") for a, b in (("node5", p), (p, "node5"))]
    for i, (a, b) in enumerate(fails):
        r = rec(a, b, None, verdict="fail").model_copy(update={"reason": "node failure",
                                                               "error_kind": last_kind if i == 3 else kind})
        out.append(r)
    return out


def test_a_node_gone_mid_screen_is_down_and_its_partners_judged_without_it():
    f = attribute(NODES, {}, [], failing_node5(), {}, RULE)
    assert f.lost == ["node5"] and f.bad_nodes == [] and not f.bad_pairs and not f.suspect_pairs
    assert f.nodes["node5"].line(5) == "node5  down: went down mid-screen (Slurm reported a node failure on every " \
                                       "step with it); 4 of its 4 pair measurements failed, none counted against " \
                                       "its partners"
    assert f.nodes["node5"].slow_in == [] and f.nodes["node1"].line(5) == "node1  ok"
    assert "down mid-screen: node5" in output.summary(f, {})
    # sinfo finds it down at the end: down, whatever its failures were
    f = attribute(NODES, {}, [], failing_node5(None, None), {}, RULE, lost={"node5": "down* (not responding)"})
    assert f.nodes["node5"].reason.startswith("went down mid-screen (down* (not responding)); 4 of its 4 pair ")
    f = attribute(NODES, {}, [], healthy(100.0) + partners_of_node5(100.0, 100.0), {}, RULE, lost={"node5": "down"})
    assert f.nodes["node5"].reason.startswith("went down mid-screen (down); 0 of its 4 pair measurements failed")


def test_a_node_that_failed_not_every_step_by_a_node_failure_is_bad_not_down():
    f = attribute(NODES, {}, [], failing_node5(last_kind="launch"), {}, RULE)
    assert f.bad_nodes == ["node5"] and f.lost == []
    assert f.nodes["node5"].reason.startswith("slow both ways: osu_bw failed: node failure (2 of 2 partners)")


def test_good_partners_are_never_bad_and_those_slow_with_some_come_after():
    records = healthy(100.0) + partners_of_node5(2.0, 2.0)[len(healthy(100.0)):]
    f = attribute(NODES, {}, [], records, {}, RULE)
    assert f.bad_nodes == ["node5"] and "node5" not in good(f)
    assert good(f)[-2:] == ["node1", "node2"]   # slow with node5 only


def test_the_slowdown_a_check_tells_is_the_rule_s_where_its_spread_is_narrow():
    """told(): 1 / (1 - slower_by) = 2x while mads MADs stay inside it; past it, what the spread allows."""
    narrow, wide = spread_of((99, 100, 101)), spread_of((80, 100, 120))    # 1 % and 20 %: 3 MADs 3 % and 60 %
    assert Peers.of(narrow).told("osu_bw", SIZE, True, RULE) == 2.0
    assert Peers.of(narrow).told("osu_bw", SIZE, False, RULE) == 2.0
    assert Peers.of(wide).told("osu_bw", SIZE, True, RULE) == pytest.approx(1 / (1 - 0.6))
    assert Peers.of(wide).told("osu_bw", SIZE, False, RULE) == 2.0        # a time: 1 + 60 % is inside 2x


def test_a_median_below_one_is_judged_as_any_other():
    peers = Peers.of(spread_of([0.5] * 5))
    assert peers.slow(rec("node1", "node2", 0.01), RULE) == \
        "osu_bw 256 KiB 1.00e-05 GB/s vs 0.000500 GB/s peer median"


def test_a_suspect_says_its_most_bad_measurements():
    """Slow sending to 2 partners, receiving from 3, evidence 4: the most a role has, 3, is said."""
    records = healthy(100.0) + [rec("node5", p, 2.0) for p in ("node1", "node2")] + \
        [rec(p, "node5", 2.0) for p in ("node1", "node2", "node3")]
    f = attribute(NODES, {}, [], records, {}, RULE.model_copy(update={"evidence": 4}))
    assert f.nodes["node5"].status == "suspect"
    assert f.nodes["node5"].reason.endswith("(2 of 2 partners); 3 bad measurements, 4 needed")
    assert f.nodes["node5"].reason.startswith("slow sending: osu_bw 256 KiB ")


def own_failure(check: str, tool: str) -> Record:
    """node3's one-node check `check` of `tool`'s layer, failed."""
    return NODE_RECORD.model_copy(update={"verdict": "fail", "reason": "exit 1", "tool": tool,
                                          "tags": {**NODE_RECORD.tags, "screen_check": check}})


def test_a_node_s_own_failures_lowest_layer_first_then_by_name():
    """The facts are the fabric's: before an MPI check's failure, level with a fabric check's (then by name)."""
    rule = RULE.model_copy(update={"evidence": 3})
    f = attribute(NODES, {}, [own_failure("lat", "osu")], healthy(100.0), {"node3": "no tcp"}, rule)
    assert f.nodes["node3"].reason == "facts: no tcp (the fabric); 2 bad measurements, 3 needed"
    f = attribute(NODES, {}, [own_failure("fi", "fi_pingpong")], healthy(100.0), {"node3": "no tcp"}, RULE)
    assert f.nodes["node3"].reason == "fails on its own: facts: no tcp (the fabric); 1 more"
    f = attribute(NODES, {}, [own_failure("a-fi", "fi_pingpong")], healthy(100.0), {"node3": "no tcp"}, RULE)
    assert f.nodes["node3"].reason == "fails on its own: a-fi failed: exit 1 (the fabric); 1 more"


def test_a_node_down_first_leaves_the_others_judged():
    f = attribute(NODES, {"node1": "drained (x)"}, [], healthy(100.0), {}, RULE)
    assert list(f.nodes) == NODES and f.nodes["node1"].status == "down" and f.nodes["node2"].status == "ok"


def test_a_bad_link_after_a_bad_node_s_pairs_is_named():
    records = partners_of_node5(2.0, 100.0) + [rec("node3", "node6", 2.0), rec("node6", "node3", 2.0)]
    f = attribute(NODES, {}, [], records, {}, RULE)
    assert f.bad_nodes == ["node5"] and list(f.bad_pairs) == [("node3", "node6")]
