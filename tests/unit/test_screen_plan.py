"""`commstack screen --plan`, in this process (where coverage and perf/mutation.py see it): each phase's rounds,
srun steps, steps at once and expected seconds, worked out by hand below from perf/screen-costs.yaml (0.74 s a
step, 15.3 steps/s started) and the benchmark's own time at the system's figures; and the screen file's schema
(screens/*.yaml): what a screen file may not say, and what it means when it says nothing."""

import copy

import pytest
import yaml

from commstack import limits
from commstack.cli.main import main
from commstack.config import StepSpec, load_system
from commstack.errors import ConfigError
from commstack.screen import plan as plan_module
from commstack.screen.plan import bench_s, costs, figures, plan
from commstack.screen.spec import load_screen

STEP_S, STEPS_PER_S = 0.74, 15.3
BW, LAT = 1e9, 10e-6   # what a system without references is assumed to have


def spec(benchmark: str, args: list, sizes=None, **kw) -> StepSpec:
    return StepSpec(benchmark=benchmark, nodes=2, args=args, sizes=sizes, **kw)


def test_the_costs_are_the_recorded_ones():
    c = costs()
    assert (c.step_s, c.steps_per_s) == (STEP_S, STEPS_PER_S)
    assert c.measured.startswith("perf/screen.py on 16 local namespace nodes")


def test_unreadable_costs_are_a_named_error(tmp_path, monkeypatch):
    path = tmp_path / "screen-costs.yaml"
    path.write_text("measured: here\nstep_s: 0.5\n")
    monkeypatch.setattr(plan_module, "COSTS", path)
    with pytest.raises(ConfigError, match=r"per-step costs not readable \('steps_per_s'\); run perf/screen.py"):
        costs()


@pytest.mark.parametrize("args, sizes, seconds", [
    # fi_pingpong: -I round trips of 2 x -S bytes, each also 2 latencies
    (["-e", "msg", "-S", "262144", "-I", "20"], None, 20 * (2 * 262144 / BW + 2 * LAT)),
    # -S all, or none: every size up to 6 MiB, counted as the largest; 1000 round trips by default
    (["-S", "all", "-I", "2"], None, 2 * (2 * (6 << 20) / BW + 2 * LAT)),
    ([], None, 1000 * (2 * (6 << 20) / BW + 2 * LAT)),
    (["-I", "7", "-S", "8"], None, 7 * (2 * 8 / BW + 2 * LAT)),
    (["-I", "5", "-S"], None, 5 * (2 * (6 << 20) / BW + 2 * LAT)),   # -S with nothing after it: as none
])
def test_a_round_trip_check_takes_its_transfers_at_the_reference_figures(args, sizes, seconds):
    assert bench_s(spec("fi_pingpong", args, sizes), BW, LAT) == pytest.approx(seconds, rel=1e-9)


@pytest.mark.parametrize("benchmark, args, sizes, seconds", [
    # osu_bw: (-i + -x) iterations of a window of -W messages (64 by default) and 2 latencies, per size
    ("osu_bw", ["-i", "10", "-x", "2"], ["262144", "262144"], 12 * (64 * 262144 / BW + 2 * LAT)),
    ("osu_bw", [], None, 1100 * (64 * (1 << 20) / BW + 2 * LAT)),                     # 1 MiB, 1000 + 100
    ("osu_mbw_mr", ["-i", "1", "-x", "0"], ["1024", "1024"], 1 * (64 * 1024 / BW + 2 * LAT)),
    ("osu_bibw", ["-x", "0", "-i", "3"], ["2", "2"], 3 * (64 * 2 / BW + 2 * LAT)),
    ("osu_bw", ["-i", "10", "-x", "2", "-W", "4"], ["262144", "262144"], 12 * (4 * 262144 / BW + 2 * LAT)),  # -W 4
    ("osu_latency", ["-W", "4"], ["8", "8"], 1100 * (8 / BW + 2 * LAT)),          # one message in flight anyway
    # osu_latency: one message an iteration, every power of two from the smallest to the largest size
    ("osu_latency", [], ["8", "64"], sum(1100 * (s / BW + 2 * LAT) for s in (8, 16, 32, 64))),
    ("osu_latency", ["-i", "1", "-x", "1"], ["0", "4"], sum(2 * (s / BW + 2 * LAT) for s in (1, 2, 4))),
    ("osu_latency", ["-i", "1", "-x", "1"], ["3", "8"], sum(2 * (s / BW + 2 * LAT) for s in (2, 4, 8))),
    # a flag that ends the arguments has no value: the default
    ("osu_latency", ["-x", "5", "-i"], ["8", "8"], 1005 * (8 / BW + 2 * LAT)),
])
def test_a_one_way_check_takes_its_windows_at_the_reference_figures(benchmark, args, sizes, seconds):
    assert bench_s(spec(benchmark, args, sizes), BW, LAT) == pytest.approx(seconds, rel=1e-9)


def test_the_figures_are_the_system_s_references_or_said_assumed():
    assert figures(load_system("local-multinode")) == (
        BW, LAT, "local-multinode has no osu_bw/osu_latency references: assumed 1 GB/s and 10 us")
    # the largest size's bandwidth in its references (23,982.18 MB/s), the smallest size's latency (3.34 us)
    assert figures(load_system("alps-gh200")) == (23982.18 * 1e6, 3.34 * 1e-6, "alps-gh200 references "
                                                  "osu_bw-host-inter (24.0 GB/s) and osu_latency-host-inter (3.34 us)")


SCREEN = {"name": "plan-test",
          "per_node": [{"id": "lat", "benchmark": "osu_latency", "nodes": 1, "ranks_per_node": 2, "sizes": [8, 8],
                        "args": ["-i", 1000, "-x", 100]}],
          "pairs": {"rounds": 2, "at_once": 1, "checks": [
              {"benchmark": "fi_pingpong", "nodes": 2, "args": ["-S", "262144", "-I", 20]},
              {"benchmark": "osu_bw", "nodes": 2, "sizes": [262144, 262144], "args": ["-i", 10, "-x", 2]}]},
          "groups": {"checks": [{"benchmark": "osu_mbw_mr", "nodes": "all"}]},
          "max_steps": 3}


def screen_file(tmp_path, **changes):
    doc = {**SCREEN, **changes}
    path = tmp_path / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_plan_of_five_nodes_worked_out_by_hand(tmp_path, capsys):
    """5 nodes: the per-node check in 2 waves of at most 3 steps; 3 rotation rounds (5 is odd: a round more), each
    2 pairs one at a time (at_once 1), fi_pingpong once and osu_bw each way."""
    lat = 1100 * (8 / BW + 2 * LAT)
    fi, bw = 20 * (2 * 262144 / BW + 2 * LAT), 12 * (64 * 262144 / BW + 2 * LAT)
    per_node = 2 * (STEP_S + lat)
    pairs = 3 * 2 * ((STEP_S + fi) + 2 * (STEP_S + bw))
    rc = main(["screen", str(screen_file(tmp_path)), "--plan", "--nodes", "5"])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert out[0] == "screen plan-test of 5 nodes on local-multinode, 3 steps at once at most"
    assert [[c.strip() for c in line.split("  ") if c] for line in out[1:-1]] == [
        ["phase", "rounds", "srun steps", "at once", "expected s", "bound by"],
        ["facts", "1", "1", "1", f"{STEP_S:.0f}", "one step over every node"],
        ["per node", "1", "5", "3", f"{per_node:.0f}", "the steps"],
        ["pairs (rotation)", "3", "18", "1", f"{pairs:.0f}", "the steps"],
        ["groups", "1 per leaf switch", "not planned: the switches come from scontrol"],
        ["total", "24", f"{STEP_S + per_node + pairs:.0f}"]]
    assert out[-1] == "from: per step 0.74 s fixed, 15.3 steps/s started (perf/screen.py on 16 local namespace " \
                      "nodes, 2 cores, 2026-11-27); benchmark times at local-multinode has no osu_bw/osu_latency " \
                      "references: assumed 1 GB/s and 10 us"


def test_plan_rows_at_their_boundaries(tmp_path):
    system = load_system("local-multinode")
    screen = load_screen(screen_file(tmp_path, per_node_at_once=2, pairs={**SCREEN["pairs"], "all_pairs_up_to": 4}))
    rows, _ = plan(screen, system, 4, max_steps=1)   # 4 nodes: all pairs, N-1 rounds; one step at once
    assert rows[1][:4] == ["per node", "1", "4", "1"] and rows[2][:4] == ["pairs (all pairs)", "3", "18", "1"]
    assert rows[1][4] == f"{4 * (STEP_S + 1100 * (8 / BW + 2 * LAT)):.0f}"
    rows, _ = plan(screen, system, 5)                 # one node more than all_pairs_up_to: the screen's rounds
    assert rows[1][:4] == ["per node", "1", "5", "2"] and rows[2][:2] == ["pairs (rotation)", "3"]
    rows, _ = plan(screen, system, 1)                 # one node: no pair
    assert [r[0] for r in rows] == ["facts", "per node", "groups", "total"]
    rows, _ = plan(load_screen(screen_file(tmp_path, per_node=[], groups=None)), system, 2)
    assert [r[0] for r in rows] == ["facts", "pairs (rotation)", "total"]


def test_a_plan_the_controller_bounds(capsys):
    """2048 nodes on alps-gh200: 6144 one-node steps and 4096 a round start no faster than 15.3 a second."""
    assert main(["screen", "--plan", "--nodes", "2048", "--system", "alps-gh200"]) == 0
    rows = {line[:16].strip(): line[16:].split() for line in capsys.readouterr().out.splitlines()[2:-1]}
    assert rows["per node"] == ["1", "6144", "512", f"{6144 / STEPS_PER_S:.0f}", "the", "controller"]
    assert rows["pairs (random)"] == ["2", "8192", "512", f"{2 * 4096 / STEPS_PER_S:.0f}", "the", "controller"]


def test_a_screen_file_that_says_nothing_gets_the_defaults(tmp_path, capsys):
    """Two rotation rounds, 256 steps at once, a confirmation round; evidence 2, 30 % and 4 MADs."""
    path = screen_file(tmp_path, per_node=[], groups=None, pairs={"checks": SCREEN["pairs"]["checks"]})
    del_max = yaml.safe_load(path.read_text())
    del del_max["max_steps"]
    path.write_text(yaml.safe_dump(del_max))
    assert main(["screen", str(path), "--plan", "--nodes", "8"]) == 0
    out = capsys.readouterr().out
    assert "8 nodes on local-multinode, 256 steps at once at most" in out
    assert [line.split()[:5] for line in out.splitlines() if line.startswith("pairs")] == \
        [["pairs", "(rotation)", "2", "24", "4"]]
    s = load_screen(path)
    assert (s.pairs.seed, s.pairs.all_pairs_up_to, s.pairs.confirm, s.pairs.at_once, s.per_node_at_once) == \
        (0, 0, True, None, None)
    assert (s.rule.evidence, s.rule.slower_by, s.rule.mads) == (2, 0.3, 4.0)


@pytest.mark.parametrize("change, error", [
    ({"pairs": {"checks": [{"benchmark": "osu_bw", "nodes": 2, "ranks_per_node": 2}]}},
     "pairs.checks: Value error, osu_bw: a pair check runs on nodes: 2 with ranks_per_node: 1"),
    ({"pairs": {"checks": [{"id": "bw", "benchmark": "osu_bw", "nodes": 2, "node_counts": [2]}]}},
     "pairs.checks: Value error, bw: a pair check runs on nodes: 2 with ranks_per_node: 1"),
    ({"pairs": {"checks": []}}, "pairs.checks"),
    ({"pairs": {"rounds": 0, "checks": SCREEN["pairs"]["checks"]}}, "pairs.rounds"),
    ({"pairs": {"rounds": 65, "checks": SCREEN["pairs"]["checks"]}}, "pairs.rounds"),
    ({"pairs": {"at_once": 0, "checks": SCREEN["pairs"]["checks"]}}, "pairs.at_once"),
    ({"pairs": {"all_pairs_up_to": -1, "checks": SCREEN["pairs"]["checks"]}}, "pairs.all_pairs_up_to"),
    ({"groups": {"checks": [{"benchmark": "osu_mbw_mr", "nodes": 2}]}},
     "groups.checks: Value error, osu_mbw_mr: a group check runs on nodes: all (the switch's nodes)"),
    ({"groups": {"checks": []}}, "groups.checks"),
    ({"per_node": [{"benchmark": "osu_latency", "nodes": 2}]},
     "per_node: Value error, osu_latency: a per-node check runs on nodes: 1"),
    ({"per_node": [{"id": "lat", "benchmark": "osu_latency", "nodes": 1, "node_counts": [1]}]},
     "per_node: Value error, lat: a per-node check runs on nodes: 1"),
    ({"rule": {"slower_by": 0}}, "rule.slower_by"),
    ({"rule": {"slower_by": 1}}, "rule.slower_by"),
    ({"rule": {"mads": 2.99}}, "rule.mads"),
    ({"rule": {"mads": float("inf")}}, "rule.mads"),
    ({"rule": {"evidence": 0}}, "rule.evidence"),
    ({"max_steps": 0}, "max_steps"),
    ({"max_steps": 100001}, "max_steps"),
    ({"per_node_at_once": 0}, "per_node_at_once"),
])
def test_what_a_screen_file_may_not_say(tmp_path, change, error):
    with pytest.raises(ConfigError, match=error.replace("(", r"\(").replace(")", r"\)")):
        load_screen(screen_file(tmp_path, **change))


def test_a_group_check_is_read_as_given():
    assert [(c.benchmark, c.nodes, c.sizes) for c in load_screen("local").groups.checks] == \
        [("osu_mbw_mr", "all", (262144, 262144))]


def test_a_screen_file_at_its_bounds_is_read(tmp_path):
    s = load_screen(screen_file(tmp_path, rule={"slower_by": 0.99, "mads": 3, "evidence": 1}, max_steps=100000,
                                per_node_at_once=1, pairs={**SCREEN["pairs"], "rounds": 64, "all_pairs_up_to": 0}))
    assert (s.rule.slower_by, s.rule.mads, s.rule.evidence) == (0.99, 3, 1)
    assert (s.max_steps, s.per_node_at_once, s.pairs.rounds, s.pairs.at_once) == (100000, 1, 64, 1)


def test_a_screen_may_have_as_many_checks_as_a_suite_steps_and_no_more(tmp_path, monkeypatch):
    """per_node, pairs and groups together (SCREEN's 1 + 2 + 1), at the bound and one more (lowered to 6 here)."""
    monkeypatch.setattr(limits, "STEPS", 6)
    lat = SCREEN["per_node"][0]
    more = [{**copy.deepcopy(lat), "id": f"lat{i}"} for i in range(3)]  # no shared lists: no YAML aliases
    assert len(load_screen(screen_file(tmp_path, per_node=[lat, *more[:2]])).per_node) == 3
    with pytest.raises(ConfigError, match="7 checks: a screen may have at most 6"):
        load_screen(screen_file(tmp_path, per_node=[lat, *more]))
