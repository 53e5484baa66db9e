"""`bin/commstack screen` on the namespace cluster of 8 nodes, for real: every link at a line rate of 200 Mbit/s
(commstack.slurm.shaping: a veth has none), then one node's link and one link between two nodes only degraded with tc; the
screen names exactly that node and that pair. A healthy screen exits 0; a drained node is reported and not
paired (7 nodes: one sits out each round); SIGTERM cancels every step and leaves nothing running; the leaf
switches of topology.conf get their own step. A screen of the one-node cluster runs no pair check, and says why.

Each test runs with screens/local.yaml (osu_bw between nodes, both ways; osu_mbw_mr per leaf switch), where an OSU
install is given (COMMSTACK_OSU_PREFIX or --osu-prefix; else skipped with the reason), and with screens/fabric.yaml
(fi_pingpong and ucx_perftest tag_bw, no group phase): a node slowed both ways, in what it sends only and in what
it receives only, a link, and a node that goes down mid-screen are named the same way with either.

Each module on the namespace cluster holds it alone (waits.namespace_cluster_alone): a second test run waits.
"""

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from commstack.slurm import namespaces, shaping
from commstack.slurm.cluster import LocalSlurm
from commstack.slurm.namespaces import NamespaceError
from checkouts import without_osu
from waits import HANG_S, namespace_cluster_alone, wait_until

pytestmark = pytest.mark.multinode
TOP = Path(__file__).resolve().parents[2]
BIN = str(TOP / "bin" / "commstack")
NODES = [f"node{i}" for i in range(1, 9)]
LINE_RATE, SLOW = "200mbit", "10mbit"


def _path() -> str:
    return os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


@pytest.fixture(scope="module")
def cluster(pytestconfig):
    if os.geteuid() != 0:
        pytest.skip("multinode: network namespaces need root")
    missing = [p for p in ("ip", "tc", "slurmctld", "slurmd", "munged", "srun") if not shutil.which(p, path=_path())]
    if missing:
        pytest.skip(f"multinode: {', '.join(missing)} not found (ci/install-deps.sh)")
    with namespace_cluster_alone(pytestconfig):
        c = LocalSlurm.multinode(8, leaf_switches=2)
        try:
            c.start()
        except NamespaceError as e:
            pytest.skip(f"multinode: {e}")
        try:
            yield c
        finally:
            shaping.clear()
            c.stop()


@pytest.fixture
def fabric(cluster):
    """Every link at the line rate; whatever a test degrades on top of it is cleared after it."""
    shaping.clear()
    shaping.line(NODES, LINE_RATE)
    yield
    shaping.clear()


@pytest.fixture(scope="module")
def osu(pytestconfig):
    """The OSU install the screen runs (pytest's --osu-prefix, else COMMSTACK_OSU_PREFIX), or None."""
    return pytestconfig.getoption("--osu-prefix") or os.environ.get("COMMSTACK_OSU_PREFIX")


@pytest.fixture(scope="module", params=["local", "fabric"])
def screen_file(request, osu):
    """Each test runs with screens/local.yaml (osu_bw between nodes, osu_mbw_mr per leaf switch; needs an OSU
    install) and with screens/fabric.yaml (fi_pingpong and ucx_perftest tag_bw, no group phase)."""
    if request.param == "local" and not osu:
        pytest.skip("screens/local.yaml runs OSU: no OSU install given (COMMSTACK_OSU_PREFIX or --osu-prefix)")
    return request.param


@pytest.fixture(scope="module")
def argv(screen_file, osu):
    """`commstack screen` on the 8 nodes with that screen file."""
    return [BIN, "screen", screen_file, *(["--osu-prefix", osu] if screen_file == "local" else []), "--system",
            "local-multinode", "--nodes", "8"]


@pytest.fixture(scope="module")
def pair_check(screen_file):
    """The one-way pair check (run both ways) whose heatmap the report shows beside fi_pingpong's."""
    return "osu_bw" if screen_file == "local" else "ucx_tag_bw"


def screen(tmp_path, argv, *args):
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    out = subprocess.run([*argv, "--results", str(tmp_path / "screen"), *args], capture_output=True, text=True,
                         env=env, timeout=600)
    doc = json.loads((tmp_path / "screen" / "screen.json").read_text())
    return out, doc


def nothing_bad(out, doc) -> None:
    """A screen that found nothing bad exits 0, or 3 where a check's spread hid the rule's slowdown (a loaded
    host's ping-pong), saying so."""
    assert out.returncode == (3 if doc["blind"] else 0), out.stdout
    assert ("not judged by " in out.stdout) is bool(doc["blind"])


def statuses(doc):
    return {n: v["status"] for n, v in doc["nodes"].items()}


def test_a_degraded_node_and_a_degraded_link_are_named_and_nothing_else(tmp_path, fabric, argv, pair_check):
    shaping.degrade_node("node3", "rate", SLOW)
    shaping.degrade_link("node2", "node7", "rate", SLOW)  # a pair of the first rotation round
    out, doc = screen(tmp_path, argv, "--drain")
    print(out.stdout, out.stderr[-2000:])
    assert out.returncode == 1
    assert doc["bad_nodes"] == ["node3"]
    assert [p["nodes"] for p in doc["bad_pairs"]] == [["node2", "node7"]]
    assert [n for n, s in statuses(doc).items() if s == "bad"] == ["node3"]
    assert "bad nodes: node3\nbad pairs: node2-node7\n" in out.stdout
    line = next(x for x in out.stdout.splitlines() if x.startswith("node3 "))
    assert line.startswith("node3  slow both ways: ") and "peer median (3 of 3 partners)" in line
    assert "scontrol update nodename=node3 state=drain 'reason=commstack screen: slow both ways: " in out.stdout
    report = tmp_path / "screen" / "report"
    assert (report / "heatmap-fi_pingpong.png").stat().st_size > 1000
    assert (report / f"heatmap-{pair_check}.png").stat().st_size > 1000
    assert "<tr class='bad'><td>node3</td>" in (report / "index.html").read_text()


@pytest.mark.parametrize("direction, said", [("out", "slow sending"), ("in", "slow receiving")])
def test_a_node_slow_one_way_is_named_alone_in_its_direction(tmp_path, fabric, argv, pair_check, direction, said):
    """node5's link slowed in what it sends (its eth0) or what it receives (its veth's host end) only: the one-way
    check reads slow that way alone, and node5 is named in that direction, nothing else."""
    shaping.degrade_node("node5", "rate", SLOW, direction)
    out, doc = screen(tmp_path, argv)
    print(out.stdout, out.stderr[-2000:])
    assert out.returncode == 1
    assert doc["bad_nodes"] == ["node5"] and doc["bad_pairs"] == []
    assert doc["nodes"]["node5"]["reason"].startswith(f"{said}: {pair_check} 256 KiB ")
    assert "bad nodes: node5\nbad pairs: none\n" in out.stdout
    # the one-way records name their sender: those from node5 (out) or to it (in) are the slow ones
    ran = [json.loads(p.read_text()) for p in (tmp_path / "screen" / "steps").glob("screen-pairs--*/record.json")]
    one_way = [r for r in ran if r["tags"]["screen_check"] == pair_check and "node5" in r["nodelist"]]
    slow_way = [r for r in one_way if (r["tags"]["screen_from"] == "node5") == (direction == "out")]
    fine_way = [r for r in one_way if r not in slow_way]
    assert len(slow_way) == len(fine_way) == 3  # two rounds and the confirmation
    assert max(r["repeats"][0][0]["bandwidth_MBps"] for r in slow_way) < \
        0.2 * min(r["repeats"][0][0]["bandwidth_MBps"] for r in fine_way)


def test_without_osu_local_yaml_judges_on_what_ran_and_says_so(tmp_path, fabric):
    """screens/local.yaml on a checkout with no OSU in reach: osu_bw is not-run on every pair, with the reason, and
    the screen judges on fi_pingpong alone: node3 is still bad (3 partners), the degraded link, measured once, a
    suspect. On a host too loaded for fi_pingpong to tell the rule's slowdown (two full test runs and a build on 2
    cores did it: a spread of 32 %, only 31x or worse told, node3 at 20x), no node it measured is ok: node3 is bad
    where the slowdown still shows, else unjudged, and the exit is never 0."""
    shaping.degrade_node("node3", "rate", SLOW)
    shaping.degrade_link("node2", "node7", "rate", SLOW)
    env = without_osu(tmp_path, {k: v for k, v in os.environ.items() if k != "SLURM_CONF"})
    out = subprocess.run([BIN, "screen", "local", "--system", "local-multinode", "--nodes", "8", "--results",
                          str(tmp_path / "screen")], capture_output=True, text=True, env=env, timeout=600)
    print(out.stdout, out.stderr[-2000:])
    doc = json.loads((tmp_path / "screen" / "screen.json").read_text())
    if "fi_pingpong" in doc["blind"]:
        assert out.returncode in (1, 3) and doc["nodes"]["node3"]["status"] in ("bad", "unjudged")
        assert "ok" not in statuses(doc).values(), out.stdout
        pytest.xfail(f"fi_pingpong cannot tell the rule's slowdown on this host: {doc['blunt']['fi_pingpong']}")
    assert out.returncode == 1 and doc["bad_nodes"] == ["node3"] and doc["bad_pairs"] == []
    assert "suspect pairs (one bad measurement, not called bad): node2-node7\n" in out.stdout
    assert doc["not_run"]["osu_bw"].startswith("no OSU micro-benchmarks here: ")
    assert doc["not_run"]["osu_bw"].endswith(" (8 nodes)")
    assert "osu_bw: not run: no OSU micro-benchmarks here: " in out.stdout
    ran = [json.loads(p.read_text()) for p in (tmp_path / "screen" / "steps").glob("screen-pairs--*/record.json")]
    assert {r["verdict"] for r in ran if r["benchmark"] == "osu_bw"} == {"not-run"}


def test_a_healthy_allocation_exits_0(tmp_path, fabric, argv, screen_file):
    out, doc = screen(tmp_path, argv)
    print(out.stdout, out.stderr[-2000:])
    nothing_bad(out, doc)
    assert doc["bad_nodes"] == [] and doc["bad_pairs"] == []
    assert "bad nodes: none\nbad pairs: none\n" in out.stdout
    pairs = [json.loads(p.read_text()) for p in (tmp_path / "screen" / "steps").glob("screen-pairs--*/record.json")]
    assert {r["benchmark"] for r in pairs} == ({"fi_pingpong", "osu_bw"} if screen_file == "local" else
                                               {"fi_pingpong", "ucx_perftest-tag_bw"})
    assert len(pairs) == 2 * 4 * 3  # 2 rounds, 4 pairs, a round trip and a one-way check each way
    # one measurement of the 24 may have crashed (Debian's Open MPI 4.1 has segfaulted in osu_bw over tcp while a
    # second test run loaded this host): its pair is a suspect, named with its failure, never passed over nor
    # called bad. Any other failure, or a second one, is not a healthy allocation.
    suspects = {tuple(p["nodes"]): " ".join(p["why"]) for p in doc["suspect_pairs"]}
    failed = [r for r in pairs if r["verdict"] != "pass"]
    assert len(failed) <= 1, [(r["nodelist"], r["benchmark"], r["verdict"], r["reason"]) for r in failed]
    assert sorted(tuple(r["nodelist"]) for r in failed) == sorted(suspects), out.stdout
    for r in failed:
        assert (r["verdict"], r["error_kind"]) == ("fail", "crashed"), r["reason"]
        assert r["reason"] in suspects[tuple(r["nodelist"])], (r["reason"], suspects)
    if screen_file == "fabric":
        return  # screens/fabric.yaml has no group phase (osu_mbw_mr is OSU's)
    # the leaf switches of topology.conf: one group step each, on its own four nodes
    groups = [json.loads(p.read_text()) for p in (tmp_path / "screen" / "steps").glob("screen-group-*/record.json")]
    assert sorted(tuple(g["nodelist"]) for g in groups) == [tuple(NODES[:4]), tuple(NODES[4:])]
    assert all(g["benchmark"] == "osu_mbw_mr" for g in groups)
    # the same crash may hit a group step instead (osu_mbw_mr segfaulted once so beside a second test run): one
    # crash at most among all 26 measurements, named on its switch's line; every other switch has its figure
    crashed = [g for g in groups if g["verdict"] != "pass"]
    assert len(failed) + len(crashed) <= 1, [(g["nodelist"], g["verdict"], g["reason"]) for g in crashed]
    lines = {line.split(":")[0]: line for line in out.stdout.splitlines() if line.startswith("switch ")}
    for g in groups:
        line = lines[f"switch leaf{1 if g['nodelist'][0] == NODES[0] else 2} ({', '.join(g['nodelist'])})"]
        if g["verdict"] == "pass":
            assert ": osu_mbw_mr 256 KiB " in line, line
        else:
            assert (g["verdict"], g["error_kind"]) == ("fail", "crashed") and g["reason"] in line, (g["reason"], line)


def test_a_lossy_node_when_the_kernel_has_netem(tmp_path, fabric, argv):
    if not shaping.has_netem():
        pytest.skip("this kernel has no sch_netem (tc qdisc add ... netem: 'Specified qdisc kind is unknown')")
    shaping.degrade_node("node5", "loss", "30%")
    out, doc = screen(tmp_path, argv)
    print(out.stdout)
    assert out.returncode == 1 and doc["bad_nodes"] == ["node5"] and doc["bad_pairs"] == []


def test_a_drained_node_is_reported_and_the_odd_rest_paired(tmp_path, fabric, cluster, argv):
    env = {**os.environ, **cluster.variables}
    subprocess.run(["scontrol", "update", "nodename=node8", "state=drain", "reason=screen test"], env=env,
                   check=True)
    try:
        out, doc = screen(tmp_path, argv)
    finally:
        subprocess.run(["scontrol", "update", "nodename=node8", "state=resume"], env=env, check=True)  # as it was
    print(out.stdout)
    nothing_bad(out, doc)
    assert doc["nodes"]["node8"]["status"] == "down" and "screen test" in doc["nodes"]["node8"]["reason"]
    assert "node8  down: drained" in out.stdout
    seven = {n: v for n, v in doc["nodes"].items() if n != "node8"}
    assert all(len(v["partners"]) >= 2 for v in seven.values()), seven
    assert not any("node8" in v["partners"] for v in seven.values())


def test_sigterm_cancels_every_step_and_reports_the_partial_screen(tmp_path, cluster, argv):
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    proc = subprocess.Popen([*argv, "--results", str(tmp_path / "screen")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    for line in proc.stderr:  # the progress lines: SIGTERM once pair steps run
        if line.startswith("screen: pairs:") and " 0 steps running" not in line:
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    print(out, err)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "interrupted (SIGTERM): the screen above is partial" in err
    assert "bad nodes:" in out
    doc = json.loads((tmp_path / "screen" / "screen.json").read_text())
    assert doc["interrupted"] is True
    left = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], env={**os.environ, **cluster.variables},
                          capture_output=True, text=True).stdout
    assert "commstack" not in left, left
    # only a screen places steps with --exact: none of its srun processes is left
    assert subprocess.run(["pgrep", "-f", "srun .*--exact"], capture_output=True).stdout == b""


def test_a_node_that_goes_down_mid_screen_is_named_down_and_the_others_judged(tmp_path, fabric, cluster, argv):
    """node5's link taken down while the pair rounds run, as a node that dies: Slurm stops hearing from it and
    every step with it fails. node5 is named down mid-screen, its partners are judged on what else they measured
    (no other node or pair called bad), nothing hangs or is left running, exit 1. Its link and Slurm state are
    restored after."""
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    slurm = {**os.environ, **cluster.variables}
    link = ["ip", "netns", "exec", namespaces.netns("node5"), "ip", "link", "set", "eth0"]
    proc = subprocess.Popen([*argv, "--results", str(tmp_path / "screen")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in proc.stderr:  # the progress lines: the link goes once pair steps run
            if line.startswith("screen: pairs:") and " 0 steps running" not in line:
                break
        subprocess.run([*link, "down"], check=True)
        out, err = proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run([*link, "up"], check=True)
        subprocess.run(["scontrol", "update", "nodename=node5", "state=resume"], env=slurm)
        wait_until(lambda: subprocess.run(["sinfo", "-h", "-n", "node5", "-o", "%T"], env=slurm, capture_output=True,
                                          text=True).stdout.strip() == "idle", "node5 back in service")
    print(out, err[-2000:])
    doc = json.loads((tmp_path / "screen" / "screen.json").read_text())
    assert proc.returncode == 1
    assert doc["lost"] == ["node5"] and doc["nodes"]["node5"]["status"] == "down"
    assert doc["nodes"]["node5"]["reason"].startswith("went down mid-screen (")
    assert "node5  down: went down mid-screen (" in out and "down mid-screen: node5\n" in out
    assert doc["bad_nodes"] == [] and doc["bad_pairs"] == []
    assert all(v["status"] in ("ok", "suspect", "unjudged") for n, v in doc["nodes"].items() if n != "node5"), \
        doc["nodes"]
    left = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], env=slurm, capture_output=True, text=True).stdout
    assert "commstack" not in left, left
    assert subprocess.run(["pgrep", "-f", "srun .*--exact"], capture_output=True).stdout == b""


@pytest.mark.slurm
def test_one_node_runs_no_pair_check_and_says_why(tmp_path):
    if os.geteuid() != 0 or not shutil.which("slurmctld", path=_path()):
        pytest.skip("the embedded Slurm needs root and slurmctld")
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    out = subprocess.run([BIN, "screen", "--system", "local", "--results", str(tmp_path / "one")],
                         capture_output=True, text=True, env=env, timeout=600)
    print(out.stdout, out.stderr[-2000:])
    assert out.returncode == 0
    assert "pairs: not run: one node in the allocation" in out.stdout
    doc = json.loads((tmp_path / "one" / "screen.json").read_text())
    assert doc["not_run"]["pairs"].startswith("one node in the allocation")
