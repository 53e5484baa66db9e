"""commstack screen without Slurm: the matchings, the screen file's schema, the verdict on the records of real
screens (tests/data/screen: 8-node local screens with node3's link at 10 Mbit/s and the link node2-node7 at
10 Mbit/s, with node5 slowed in one direction, and one without), what it writes, and `--plan`, through
`bin/commstack` where a user types it."""

import itertools
import json
import subprocess
from pathlib import Path

import pytest

from commstack.benchmarks import BENCHMARKS
from commstack.errors import ConfigError
from commstack.results.records import Record
from commstack.screen import matching, output
from commstack.screen.spec import load_screen
from commstack.screen.verdict import attribute, good, suspects

TOP = Path(__file__).resolve().parents[2]
DATA = TOP / "tests" / "data" / "screen"
NODES = [f"node{i}" for i in range(1, 9)]


def nodes(n):
    return [f"node{i}" for i in range(1, n + 1)]


def assert_matchings(rounds, names):
    for rnd in rounds:
        flat = [x for p in rnd for x in p]
        assert len(flat) == len(set(flat)), f"a node twice in one round: {rnd}"
        assert set(flat) <= set(names)
        assert len(rnd) == len(names) // 2


@pytest.mark.parametrize("n", [2, 3, 7, 8, 16, 17])
@pytest.mark.parametrize("how", ["rotation", "random"])
def test_rounds_are_perfect_matchings_and_give_every_node_two_partners(n, how):
    names = nodes(n)
    rounds = matching.rounds_for(names, 2, how, seed=3)
    assert_matchings(rounds, names)
    partners = matching.partners(rounds)
    assert set(partners) == set(names)
    want = min(2, n - 1)
    assert all(len(p) >= want for p in partners.values()), partners
    if n % 2:  # one node sits out each round, a different one, and a round more is made
        assert len(rounds) == 3
        out = [next(iter(set(names) - {x for p in rnd for x in p})) for rnd in rounds]
        assert len(set(out)) == 3


def test_rotation_rounds_repeat_no_pair_and_all_pairs_is_every_pair_once():
    rounds = matching.rounds_for(nodes(8), 3, "rotation")
    met = [matching.pair(*p) for rnd in rounds for p in rnd]
    assert len(met) == len(set(met)) == 12
    every = matching.rounds_for(nodes(8), 2, "rotation", all_pairs_up_to=8)
    assert len(every) == 7
    assert sorted(matching.pair(*p) for rnd in every for p in rnd) == \
        sorted(matching.pair(a, b) for a, b in itertools.combinations(nodes(8), 2))


def test_seeded_matching_is_the_same_for_the_same_seed_and_other_for_another():
    a = matching.rounds_for(nodes(16), 2, "random", seed=1)
    assert a == matching.rounds_for(nodes(16), 2, "random", seed=1)
    assert a != matching.rounds_for(nodes(16), 2, "random", seed=2)


def test_one_node_has_no_pair_round():
    assert matching.rounds_for(["node1"], 2, "rotation") == []


def test_confirm_gives_each_suspect_a_good_node_it_has_not_met():
    met = {"node3": {"node4", "node6"}, "node4": {"node3"}}
    assert matching.confirm(["node3", "node4"], ["node4", "node1", "node8"], met) == \
        [("node3", "node1"), ("node4", "node8")]


def test_leaf_switches_from_scontrol_show_topology():
    text = (DATA / "topology.txt").read_text()
    split = lambda hostlist: hostlist.split(",")  # noqa: E731 - scontrol show hostnames, for comma lists
    assert matching.leaf_switches(text, split) == {"leaf1": nodes(4), "leaf2": [f"node{i}" for i in range(5, 9)]}
    with pytest.raises(ValueError, match="not a line of scontrol show topology: 'SwitchName leaf1'"):
        matching.leaf_switches("SwitchName leaf1\n", split)


def test_the_rotation_schedule_of_four_and_five_nodes():
    """Node 0 stays, the others turn a place a round; five nodes: a sixth place that sits out (None)."""
    assert matching.rotation(nodes(4), 5) == [[("node1", "node4"), ("node2", "node3")],
                                              [("node1", "node3"), ("node4", "node2")],
                                              [("node1", "node2"), ("node3", "node4")]]
    assert matching.rotation(nodes(5), 2) == [[("node2", "node5"), ("node3", "node4")],
                                              [("node1", "node5"), ("node2", "node3")]]
    assert matching.rounds_for(nodes(5), 2, "rotation", all_pairs_up_to=4) == matching.rotation(nodes(5), 3)
    assert matching.rounds_for(nodes(4), 1, "rotation", all_pairs_up_to=4) == matching.rotation(nodes(4), 3)


def test_seeded_rounds_avoid_the_pairs_met_before():
    """Four nodes have three perfect matchings: three seeded rounds are all of them, each pair once; a fourth
    round must repeat pairs, and takes a matching as good as any (none repeats fewer than two)."""
    rounds = matching.seeded(nodes(4), 4, seed=5)
    met = [matching.pair(*p) for rnd in rounds[:3] for p in rnd]
    assert sorted(met) == sorted(itertools.combinations(nodes(4), 2))
    assert len(rounds[3]) == 2 and all(matching.pair(*p) in met for p in rounds[3])
    assert rounds == [[("node1", "node2"), ("node4", "node3")], [("node2", "node3"), ("node4", "node1")],
                      [("node3", "node1"), ("node2", "node4")], [("node2", "node3"), ("node1", "node4")]]
    assert matching.seeded(nodes(3), 1, seed=0)[0][0] in itertools.permutations(nodes(3), 2)


def test_confirm_never_pairs_a_node_with_itself_and_leaves_a_suspect_without_a_mate():
    assert matching.confirm(["node3"], ["node3", "node5"], {}) == [("node3", "node5")]
    assert matching.confirm(["node3", "node4"], ["node5"], {"node4": set()}) == [("node3", "node5")]
    assert matching.confirm(["node3", "node4"], ["node5", "node6"], {"node3": {"node5", "node6"}}) == \
        [("node4", "node5")]


def test_leaf_switches_skip_blank_lines_and_switches_without_nodes():
    text = "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=a,b\n\n" \
           "SwitchName=s2 Level=0 LinkSpeed=1\nSwitchName=s3 Level=0 LinkSpeed=1 Nodes=c\n"
    assert matching.leaf_switches(text, lambda h: h.split(",")) == {"s1": ["a", "b"], "s3": ["c"]}


def records(case):
    return [Record.model_validate_json(p.read_text()) for p in sorted((DATA / case).glob("*.json"))]


def findings(case):
    rs = records(case)
    rule = load_screen("local").rule
    by = lambda ph: [r for r in rs if r.tags.get("screen_phase") == ph]  # noqa: E731
    return attribute(NODES, {}, by("per-node"), by("pairs"), {}, rule)


def test_a_degraded_node_and_link_are_named_and_nothing_else():
    f = findings("degraded")
    assert f.bad_nodes == ["node3"]
    assert list(f.bad_pairs) == [("node2", "node7")]
    assert f.nodes["node3"].line(5).startswith("node3  slow both ways: osu_bw 256 KiB ")
    assert "of 3 partners" in f.nodes["node3"].reason  # two rounds and the confirmation
    assert all(v.status in ("ok", "suspect") for n, v in f.nodes.items() if n != "node3")
    assert output.drain_lines(f) == [["scontrol", "update", "nodename=node3", "state=drain",
                                      f"reason=commstack screen: {f.nodes['node3'].reason}"[:250]]]
    # a reason that quotes a node's output: one line, its controls escaped, in Slurm's record as on the terminal
    f.nodes["node3"].reason = "crashed: \x1b]0;PWNED\x07\nstate=resume \u202e"
    assert output.drain_lines(f)[0][4] == "reason=commstack screen: crashed: \\x1b]0;PWNED\\x07\\x0astate=resume \\u202e"


@pytest.mark.parametrize("case, said", [("egress", "slow sending"), ("ingress", "slow receiving")])
def test_a_node_slowed_one_way_is_named_alone_in_its_direction(case, said):
    """node5 slowed in what it sends, or receives, only: osu_bw reads slow the one way and not the other."""
    f = findings(case)
    assert f.bad_nodes == ["node5"] and f.bad_pairs == {}
    assert f.nodes["node5"].reason.startswith(f"{said}: osu_bw 256 KiB ")
    assert f.nodes["node5"].reason.endswith("(3 of 3 partners)")  # two rounds and the confirmation
    m, _ = output.matrix(NODES, records(case), "osu_bw", f)
    five = NODES.index("node5")
    row, column = [v for v in m[five] if v == v], [r[five] for r in m if r[five] == r[five]]
    slow, fine = (row, column) if case == "egress" else (column, row)
    assert len(slow) == len(fine) == 3 and max(slow) < 0.2 < 0.8 < min(fine)


def test_a_healthy_screen_calls_nothing_bad():
    f = findings("clean")
    assert f.bad_nodes == [] and f.bad_pairs == {}
    assert output.drain_lines(f) == []


def test_too_few_slow_measurements_are_not_enough():
    """evidence 4: the degraded link (3 slow measurements: fi_pingpong, osu_bw both ways) is a suspect, not bad."""
    rs = records("degraded")
    rule = load_screen("local").rule.model_copy(update={"evidence": 4})
    f = attribute(NODES, {}, [], [r for r in rs if r.tags.get("screen_phase") == "pairs"], {}, rule)
    assert ("node2", "node7") in f.suspect_pairs and not f.bad_pairs


def test_suspects_and_good_partners_before_the_confirmation():
    rs = [r for r in records("degraded") if r.tags.get("screen_round") in (1, 2)]
    f = attribute(NODES, {}, [], rs, {}, load_screen("local").rule)
    assert suspects(f) == ["node3"]
    # first the nodes fine with every partner, then those fine with some (node2, node7: their link; node4,
    # node6: node3); never the suspect
    assert good(f) == ["node1", "node5", "node8", "node2", "node4", "node6", "node7"]


def test_down_nodes_are_reported_and_not_screened():
    f = attribute(NODES, {"node8": "drained (maintenance)"}, [], [], {}, load_screen("local").rule)
    assert f.nodes["node8"].line(5) == "node8  down: drained (maintenance): not screened"


def test_report_has_a_heatmap_per_pair_check_and_the_node_table(tmp_path):
    f = findings("degraded")
    rs = records("degraded")
    doc = {"run_id": "x", "system": "local-multinode", "screen": "local", "wall_s": 1.0, "exit": 1}
    page = output.write(tmp_path, doc, NODES, f, rs, {})
    pngs = sorted(p.name for p in (tmp_path / "report").glob("*.png"))
    assert pngs == ["heatmap-fi_pingpong.png", "heatmap-osu_bw.png"]
    assert (tmp_path / "report" / "heatmap-osu_bw.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = page.read_text()
    assert "<tr class='bad'><td>node3</td>" in html and "<b>node2–node7</b>" in html
    spread = f.peers.stats[("osu_bw", 262144)]
    assert f"<tr><td>osu_bw</td><td>256 KiB</td><td>{spread.median:.4g} MB/s</td><td>{spread.mad:.3g}</td>" \
           f"<td>{spread.relative:.0%}</td><td>{spread.count}</td></tr>" in html
    saved = json.loads((tmp_path / "screen.json").read_text())
    assert saved["bad_nodes"] == ["node3"] and saved["bad_pairs"][0]["nodes"] == ["node2", "node7"]
    m, size = output.matrix(NODES, rs, "osu_bw", f)
    assert size == 262144
    assert m[2][3] < 0.2 and m[1][6] < 0.2 and m[0][7] > 0.5  # node3-node4, node2-node7 dark; node1-node8 not


def test_the_fabric_screen_runs_no_osu_and_names_a_pair_on_its_own_measurements():
    """screens/fabric.yaml is what a machine without OSU screens with (CI): no check of OSU's, and as many pair
    checks as the rule's evidence, so that a pair measured once per screen can still be called bad."""
    fabric = load_screen("fabric")
    checks = fabric.per_node + fabric.pairs.checks + (fabric.groups.checks if fabric.groups else [])
    assert {BENCHMARKS[c.benchmark].tool.name for c in checks} <= {"mpi-pingpong", "fi_pingpong", "ucx_perftest"}
    assert len(fabric.pairs.checks) >= fabric.rule.evidence


def test_screen_file_errors_are_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\npairs:\n  checks:\n  - {benchmark: osu_bw, nodes: 1}\n")
    with pytest.raises(ConfigError, match="pairs.checks: Value error, osu_bw: a pair check runs on nodes: 2"):
        load_screen(bad)
    out = subprocess.run([str(TOP / "bin" / "commstack"), "screen", str(bad), "--plan", "--nodes", "8"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "a pair check runs on nodes: 2" in out.stderr and "Traceback" not in out.stderr


def test_plan_for_2048_and_10000_nodes():
    out = subprocess.run([str(TOP / "bin" / "commstack"), "screen", "--plan", "--nodes", "2048", "--system",
                          "alps-gh200"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[2:]}
    assert rows["per"][2:4] == ["1", "6144"]          # 3 one-node checks on 2048 nodes, one round
    assert rows["pairs"][2:4] == ["2", "8192"]        # 2 rounds x 1024 pairs x 4 steps (osu_bw each way)
    assert "alps-gh200 references osu_bw-host-inter" in out.stdout
    out = subprocess.run([str(TOP / "bin" / "commstack"), "screen", "--plan", "--nodes", "10000", "--system",
                          "alps-gh200"], capture_output=True, text=True)
    assert "pairs (random)  2       40000" in out.stdout


def test_apply_without_drain_is_refused():
    out = subprocess.run([str(TOP / "bin" / "commstack"), "screen", "--apply"], capture_output=True, text=True)
    assert out.returncode == 2 and "--apply runs the --drain lines: give both" in out.stderr


def test_a_nodes_history_across_screens(tmp_path):
    """Every step of a screen goes into the history with its nodes: `history --node` is one node's own."""
    run = tmp_path / "20261127-055604-848390-b1580a"
    for r in records("degraded"):
        (run / "steps" / r.dirname).mkdir(parents=True)
        (run / "steps" / r.dirname / "record.json").write_text(r.model_dump_json())
    db = tmp_path / "history.sqlite"
    bin_ = str(TOP / "bin" / "commstack")
    out = subprocess.run([bin_, "history", "import", str(run), "--history", str(db)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([bin_, "history", "--node", "node3", "--history", str(db)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    steps = {line.split()[2] for line in out.stdout.splitlines() if "local-multinode" in line}
    # its own check, its leaf switch's, a round trip with each partner and osu_bw each way
    assert steps == {"screen-per-node/pingpong-intra-cpu--node3", "screen-group-leaf1/osu_mbw_mr--switch-leaf1",
                     "screen-pairs/fi_pingpong--node3-node1-r3", "screen-pairs/fi_pingpong--node3-node4-r2",
                     "screen-pairs/fi_pingpong--node3-node6-r1", "screen-pairs/osu_bw--node3-node1-r3",
                     "screen-pairs/osu_bw--node1-node3-r3", "screen-pairs/osu_bw--node3-node4-r2",
                     "screen-pairs/osu_bw--node4-node3-r2", "screen-pairs/osu_bw--node3-node6-r1",
                     "screen-pairs/osu_bw--node6-node3-r1"}


@pytest.mark.parametrize("args, error", [
    (["--max-steps", "0"], "--max-steps 0: 1 or more steps at once"),
    (["--nodes", "1"], "--nodes 1: the local multi-node cluster has 2 nodes or more"),
    (["--plan"], "--plan needs --nodes N"),
    (["no-such-screen"], "unknown screen 'no-such-screen'; known: fabric, local, maintenance"),
])
def test_bad_command_lines_are_named_errors(args, error):
    out = subprocess.run([str(TOP / "bin" / "commstack"), "screen", *args], capture_output=True, text=True)
    assert out.returncode == 2 and error in out.stderr and "Traceback" not in out.stderr, out.stderr
