"""The parts of a screen that run without Slurm (the rest: tests/slurm/test_screen_cluster.py): which sinfo states
leave a node out, a pair's checks both ways, the checks a phase expands to and the binaries they take, the
one-node checks' placement and the facts that count against a node, the steps' file names, the progress line,
what was not run and why, and what a screen writes, on the records of a real screen (tests/data/screen)."""

import copy
import dataclasses
import io
import json
import threading
import time

import pytest

from commstack.config import load_system
from commstack.results.records import Record
from commstack.run.binaries import Binaries
from commstack.screen import nodes as node_phase
from commstack.run.lifecycle import Lifecycle
from commstack.screen import pool
from commstack.screen.pool import Context, Placed, Progress, broken
from commstack.screen.run import Outcome, Screen, _natural, both_ways, unavailable_of
from commstack.screen.spec import load_screen
from test_screen import NODES, findings, records

SYSTEM = load_system("local-multinode")


@pytest.fixture
def screen(tmp_path):
    """A screen of screens/local.yaml on local-multinode, without OSU (its checks are not-run)."""
    run = tmp_path / "20261129-010101-000000-abcdef"
    run.mkdir()
    return Screen(SYSTEM, load_screen("local"), run,
                  Binaries(osu_prefix=str(tmp_path / "no-osu"), build_dir=run / "build", build=False))


@pytest.mark.parametrize("state, out", [
    ("idle", False), ("mixed", False), ("allocated", False), ("completing", False), ("idle~", False),
    ("idle*", True),        # not responding
    ("down", True), ("down*", True), ("drained", True), ("draining", True), ("drain", True), ("fail", True),
    ("maint", True), ("reserved", True), ("powered_down~", True), ("unknown", True), ("future", True),
    ("not_responding", True), ("mixed-", False), ("down$", True),
])
def test_which_sinfo_states_leave_a_node_out(state, out):
    assert bool(unavailable_of(["node1"], {"node1": (state, "none")})) is out


def test_the_nodes_left_out_and_why():
    states = {"node1": ("idle", "none"), "node2": ("drained", "maintenance"), "node3": ("down*", "none"),
              "node4": ("mixed", "")}
    assert unavailable_of(["node1", "node2", "node3", "node4", "node9"], states) == {
        "node2": "drained (maintenance)", "node3": "down*", "node9": "unknown (not in sinfo)"}


def test_node_names_sort_by_their_numbers():
    assert sorted(["node10", "node9", "node1", "gpu2a", "gpu10a"], key=_natural) == \
        ["gpu2a", "gpu10a", "node1", "node9", "node10"]


def test_the_exit_is_1_for_a_bad_node_a_bad_pair_or_a_node_lost():
    clean, degraded = findings("clean"), findings("degraded")
    assert Outcome(NODES, clean, {}, []).exit == 0 and Outcome(NODES, degraded, {}, []).exit == 1
    degraded.nodes["node3"].status = "ok"
    assert degraded.bad_nodes == [] and Outcome(NODES, degraded, {}, []).exit == 1   # node2-node7 still
    clean.lost.append("node4")
    assert Outcome(NODES, clean, {}, []).exit == 1


def test_a_pair_s_checks_run_both_ways_where_one_way(screen):
    checks, paths = screen.checks(screen.screen.pairs.checks, 2, "pairs")
    assert [c.id for c in checks] == ["fi_pingpong", "osu_bw"]
    placed = both_ways(checks, ("node2", "node7"), 3)
    assert [(p.check.id, p.hosts, p.phase, p.round) for p in placed] == [
        ("fi_pingpong", ("node2", "node7"), "pairs", 3), ("osu_bw", ("node2", "node7"), "pairs", 3),
        ("osu_bw", ("node7", "node2"), "pairs", 3)]
    assert [p.name for p in placed] == ["fi_pingpong--node2-node7-r3", "osu_bw--node2-node7-r3",
                                        "osu_bw--node7-node2-r3"]


def test_a_phase_s_checks_are_named_and_get_their_binaries_or_why_not(screen, tmp_path):
    checks, paths = screen.checks(screen.screen.pairs.checks, 2, "pairs")
    assert checks[0].not_run is None and paths["fi_pingpong"]["$FI_PINGPONG"].endswith("/fi_pingpong")
    assert checks[1].not_run.startswith(f"{tmp_path / 'no-osu'} is not an OSU install") and "osu_bw" not in paths
    checks, paths = screen.checks(screen.screen.per_node, 1, "per-node")
    assert [c.id for c in checks] == ["pingpong-intra-cpu"]
    assert paths == {"pingpong-intra-cpu": {"$PINGPONG": str(screen.dir / "build" / "mpi-pingpong")}}
    # device memory and an environment name the check; one the system cannot run is not-run, with no binary
    checks, paths = screen.checks(load_screen("maintenance").per_node, 1, "per-node")
    assert [c.id for c in checks] == ["latency-intra", "d2d-bw-device", "nccl-intra-device-nccl-tests"]
    assert checks[1].not_run == "device memory needs GPUs, system local-multinode has none" and paths == {}


def test_a_screen_takes_the_screen_file_s_steps_at_once_unless_told(screen, tmp_path):
    assert screen.max_steps == 64 and screen.progress.total == 0 and screen.steps.interrupted_by == "Ctrl-C"
    other = Screen(SYSTEM, load_screen("local"), tmp_path, Binaries(build=False), max_steps=3)
    assert other.max_steps == 3


def facts_of(node: str) -> dict:
    """node's stack facts as the real screen recorded them (tcp among its libfabric providers)."""
    r = next(r for r in records("degraded") if r.nodelist == [node])   # its one-node check
    return copy.deepcopy(r.stack["nodes"][node])


def test_the_facts_that_count_against_a_node():
    facts = {"node1": facts_of("node1"), "node2": facts_of("node2"), "node3": facts_of("node3")}
    facts["node2"]["libfabric_providers"].remove("tcp")
    facts["node3"]["ucx_transports"] = ["self/memory0"]
    problems = node_phase.problems(SYSTEM, facts)
    assert problems == {
        "node2": "provider tcp not found on node2: libfabric built without tcp, or the tcp driver not loaded",
        "node3": "UCX transport tcp not found on node3: " + problems["node3"].split(": ", 1)[1]}
    assert node_phase.problems(SYSTEM.model_copy(update={"fabric": None}), facts) == {}  # no fabric: nothing asked


def test_a_check_that_needs_gpus_is_not_run_on_a_node_without(screen):
    gpu = screen.checks(load_screen("maintenance").per_node, 1, "per-node")[0]
    cpu = screen.checks(screen.screen.per_node, 1, "per-node")[0][0]
    facts = {"node1": facts_of("node1"), "node2": {**facts_of("node2"), "gpus": ["GPU 0: H100"]}}
    placed = node_phase.placed([cpu, gpu[2]], ["node1", "node2", "node3"], facts)
    assert {(p.round, p.name) for p in placed[:1]} == {(0, "pingpong-intra-cpu--node1")}   # no round: one phase
    assert [(p.check.id, p.hosts, p.phase, p.not_run) for p in placed] == [
        ("pingpong-intra-cpu", ("node1",), "per-node", None), ("pingpong-intra-cpu", ("node2",), "per-node", None),
        ("pingpong-intra-cpu", ("node3",), "per-node", None),
        ("nccl-intra-device-nccl-tests", ("node1",), "per-node",
         "nccl-intra-device-nccl-tests needs GPUs; node1 has none (nvidia-smi -L lists none)"),
        ("nccl-intra-device-nccl-tests", ("node2",), "per-node", None),
        ("nccl-intra-device-nccl-tests", ("node3",), "per-node", None)]   # no facts: it is tried
    assert [node_phase.needs_gpus(s) for s in [cpu, *gpu]] == [False, False, True, True]


def test_the_probe_runs_the_first_check_s_binary(screen):
    cpu, paths = screen.checks(screen.screen.per_node, 1, "per-node")
    pairs, pair_paths = screen.checks(screen.screen.pairs.checks, 2, "pairs")
    ctx = Context(Lifecycle(screen.dir, SYSTEM, None), None, {}, {**paths, **pair_paths})
    assert node_phase.probe_binary(ctx, cpu + pairs) == str(screen.dir / "build" / "mpi-pingpong")
    # a placeholder that heads a path: the path under the binary's; a program run through the pair launcher
    # (fi_pingpong), or a check without a binary (osu_bw without OSU): any program the node has
    ctx.binaries["osu_bw"] = {"$OSU_MPI": "/opt/osu/libexec/osu-micro-benchmarks/mpi"}
    assert node_phase.probe_binary(ctx, pairs[1:]) == "/opt/osu/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_bw"
    del ctx.binaries["osu_bw"]
    assert node_phase.probe_binary(ctx, pairs).endswith("/true")


@pytest.mark.parametrize("hosts, phase, round_, name", [
    (("node3",), "per-node", 0, "lat--node3"),
    (("node3", "node4"), "pairs", 2, "lat--node3-node4-r2"),
    (("node1", "node2", "node3"), "switch leaf 1", 0, "lat--switch-leaf-1"),
    (("nid0/1", "nid 2"), "pairs", 1, "lat--nid0_1-nid_2-r1"),
    (("n" * 200,), "per-node", 0, ("lat--" + "n" * 200)[:180]),
])
def test_a_placed_check_s_file_name(screen, hosts, phase, round_, name):
    check = screen.checks(screen.screen.per_node, 1, "per-node")[0][0]
    assert Placed(dataclasses.replace(check, id="lat"), hosts, phase, round_).name == name


def test_a_group_check_is_placed_in_no_round(screen):
    """run.groups places a leaf switch's check without a round: its name has none."""
    check = dataclasses.replace(screen.checks(screen.screen.per_node, 1, "per-node")[0][0], id="bw")
    assert Placed(check, ("node1", "node2", "node3"), "switch leaf1").name == "bw--switch-leaf1"


def test_a_check_that_left_no_measurement(screen):
    """A check the screen never started (Ctrl-C before it), and one whose worker died of a bug: each recorded
    on its nodes, and saved."""
    check = screen.checks(screen.screen.pairs.checks, 2, "pairs")[0][0]
    ctx = Context(Lifecycle(screen.dir, SYSTEM, None), None, {}, {})
    placed = Placed(check, ("node1", "node2"), "pairs", 1)
    r = ctx.steps.ended(7, dataclasses.replace(check, id=placed.name), "interrupted (Ctrl-C) before this step",
                        placed.hosts)
    assert (r.run_id, r.index, r.step, r.verdict, r.reason, r.error_kind, r.nodelist) == (
        screen.dir.name, 7, "fi_pingpong--node1-node2-r1", "not-run", "interrupted (Ctrl-C) before this step", None,
        ["node1", "node2"])
    r = broken(ctx, 8, Placed(check, ("node1",), "pairs"))
    assert (r.verdict, r.reason, r.nodelist) == ("fail", "commstack screen: internal error", ["node1"])
    assert [Record.read(p).step for p in sorted(screen.dir.glob("steps/*/record.json"))] == [
        "fi_pingpong--node1", "fi_pingpong--node1-node2-r1"]


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_progress_line_on_a_terminal_is_rewritten_in_place():
    out = Terminal()
    p = Progress(8, out)
    p.show("pairs", 1, 0, None)
    p.show("pairs", 1, 0, None)      # the same line: not again
    p.show("pairs", 2, 3, 12.4)
    p.end()
    p.end()                          # nothing shown since: no new line
    assert out.getvalue() == ("\r\033[Kscreen: pairs: 1 step running, 0/8 nodes done"
                              "\r\033[Kscreen: pairs: 2 steps running, 3/8 nodes done, ~12 s left\n")


class Flushed(Terminal):
    """A terminal that keeps what had reached it at each flush."""

    def __init__(self):
        super().__init__()
        self.flushed = []

    def flush(self):
        self.flushed.append(self.getvalue())


def test_the_progress_line_reaches_the_terminal_at_once():
    """Flushed as it is written, and so is the end of the line: a progress line held in a buffer says nothing."""
    out = Flushed()
    p = Progress(2, out)
    p.show("pairs", 1, 0, None)
    assert out.flushed[-1] == "\r\033[Kscreen: pairs: 1 step running, 0/2 nodes done"
    p.end()
    assert out.flushed[-1].endswith("nodes done\n")


def test_the_progress_line_elsewhere_is_printed_at_most_every_5_s():
    out = io.StringIO()
    p = Progress(4, out)
    p.show("per-node", 2, 0, None)
    p.at = time.monotonic() - 4.2    # shown 4.2 s ago: not yet
    p.show("per-node", 1, 2, 3.0)
    p.at = time.monotonic() - 5.5    # 5.5 s ago: again
    p.show("per-node", 0, 4, 0.0)
    p.end()
    assert out.getvalue() == ("screen: per-node: 2 steps running, 0/4 nodes done\n"
                              "screen: per-node: 0 steps running, 4/4 nodes done, ~0 s left\n")


def test_checks_not_run_are_said_once_per_check_and_reason(screen):
    """osu_bw not run on two pairs (3 nodes), fi_pingpong on one node, osu_bw interrupted: said apart, or not."""
    bw = [r for r in records("degraded") if r.tags.get("screen_check") == "osu_bw"]
    fi = next(r for r in records("degraded") if r.tags.get("screen_check") == "fi_pingpong")
    not_run = lambda r, why, **kw: r.model_copy(update={"verdict": "not-run", "reason": why, **kw})  # noqa: E731
    screen.skipped([not_run(bw[0], "no OSU", nodelist=["node1", "node2"]),
                    not_run(bw[1], "no OSU", nodelist=["node2", "node3"]),
                    not_run(bw[2], "interrupted (Ctrl-C) before this step"), bw[3],
                    not_run(fi, "no fi_pingpong", nodelist=["node8"])])
    assert screen.not_run == {"osu_bw": "no OSU (3 nodes)", "fi_pingpong": "no fi_pingpong (1 node)"}


def test_a_screen_judges_its_records_by_phase_and_its_nodes_facts(screen):
    screen.records = records("degraded")
    facts = {"node1": {**facts_of("node1"), "libfabric_providers": []}}
    f = screen.findings(NODES, facts)
    assert f.bad_nodes == ["node3"] and list(f.bad_pairs) == [("node2", "node7")]
    assert f.nodes["node1"].status == "suspect"   # one facts problem, two bad measurements needed
    assert f.nodes["node1"].reason.startswith("facts: provider tcp not found on node1")
    assert f.nodes["node1"].reason.endswith("(the fabric); 1 bad measurement, 2 needed")
    screen.down = {"node8": "drained (x)"}
    assert screen.findings(NODES[:7], {}).nodes["node8"].line(5) == "node8  down: drained (x): not screened"


def test_what_a_screen_writes_and_its_history(screen, tmp_path):
    screen.records = records("degraded")
    for r in screen.records:
        r.model_copy(update={"run_id": screen.dir.name}).write(screen.dir)
    outcome = Outcome(NODES, screen.findings(NODES, {}), {"groups": "no leaf switches"}, screen.records,
                      wall_s=12.0, phases_s={"pairs": 10.0})
    screen.write(outcome, tmp_path / "history.sqlite")
    doc = json.loads((screen.dir / "screen.json").read_text())
    assert {k: doc[k] for k in ("run_id", "system", "screen", "wall_s", "phases_s", "exit", "interrupted",
                                "max_steps", "steps", "bad_nodes", "not_run")} == {
        "run_id": screen.dir.name, "system": "local-multinode", "screen": "local", "wall_s": 12.0,
        "phases_s": {"pairs": 10.0}, "exit": 1, "interrupted": False, "max_steps": 64,
        "steps": len(screen.records), "bad_nodes": ["node3"], "not_run": {"groups": "no leaf switches"}}
    assert outcome.report == screen.dir / "report" / "index.html" and (tmp_path / "history.sqlite").exists()
    # a history that cannot be written is said, the screen's files kept
    (tmp_path / "bad.sqlite").write_text("not a database")
    screen.write(outcome, tmp_path / "bad.sqlite")
    assert outcome.not_run["history"].startswith(f"{tmp_path / 'bad.sqlite'}: ")


def test_a_check_not_run_frees_no_node_that_a_running_check_holds(screen, monkeypatch):
    """A not-run check on a pair that another check is measuring ends at once; the pair stays busy until the
    measuring check ends, so a third check on it waits (it did not: the not-run check freed the pair)."""
    check = screen.checks(screen.screen.pairs.checks, 2, "pairs")[0][0]
    ctx = Context(Lifecycle(screen.dir, SYSTEM, None), None, {}, {})
    pair = ("node1", "node2")
    placed = [Placed(check, pair, "pairs", 1), Placed(check, pair, "pairs", 2, "no binary"),
              Placed(check, pair, "pairs", 3)]
    real, looked, not_run_done, log = pool.measure, threading.Semaphore(0), threading.Event(), []

    class Looked(Progress):
        def show(self, *args):   # once per pass of run_all's loop, after it took in what ended
            looked.release()

    def measure(ctx, p, index):
        if p.not_run:
            rec = real(ctx, p, index)
            not_run_done.set()
            return rec
        log.append(("start", p.round))
        if p.round == 1:  # hold the pair while run_all takes in the not-run check and looks for work after it
            assert not_run_done.wait(60)
            for _ in range(3):
                assert looked.acquire(timeout=60)
        log.append(("end", p.round))
        return ctx.steps.ended(index, dataclasses.replace(p.check, id=p.name), "measured", p.hosts)

    monkeypatch.setattr(pool, "measure", measure)
    records = pool.run_all(ctx, placed, "pairs", 4, Looked(2, io.StringIO()))
    assert log == [("start", 1), ("end", 1), ("start", 3), ("end", 3)]
    assert [r.verdict for r in records] == ["not-run", "not-run", "not-run"]
    assert records[1].reason == "no binary"
