"""The lowest layer at fault, as `commstack compare` and the report print it. Every record is built as the runner
builds it, from a real recorded output: parsed and checked (parse_output), then judged (judge). Where a test
needs a short run it multiplies the figures of a real one by a factor, and says so (`scale`)."""

import dataclasses
import html
import math
import shlex
from pathlib import Path

import pytest

from commstack import benchmarks
from commstack.cli.main import main as commstack
from commstack.benchmarks import METRICS
from commstack.config import load_system
from commstack.errors import ParseError
from commstack.paths import TOP
from commstack.results.diagnosis import _worse, against_references, diagnose, size_text
from commstack.results.judge import judge
from commstack.results.parse import parse_output
from commstack.results.records import Record, read_run
from commstack.results.report import write_report
from commstack.results.references import load_references

SEEDS = TOP / "systems" / "references" / "seeds"
DATA = TOP / "tests" / "data"
ALPS = load_system("alps-gh200")
REFS = load_references(ALPS.references)
PAIR = ["node1", "node2"]

#: real outputs, with the arguments they ran with: Alps' osu_bw with and without the CXI hook (seeds 000, 013:
#: 24.0 and 3.12 GB/s at 4 MiB), fi_pingpong over tcp and ucx_perftest's tag_bw between two network-namespace
#: nodes of local-multinode
OSU_BW = (SEEDS / "cscs-osu-01.txt", "")
OSU_BW_NO_CXI = (SEEDS / "cscs-osu-10.txt", "")
FI_PINGPONG = (DATA / "fi_pingpong" / "1.17" / "tcp-rdm-all-netns.client.stdout", "-p tcp -e rdm -S all -I 20")
UCX_TAG_BW = (DATA / "ucx_perftest" / "1.13" / "pair-slurm-netns-tag_bw.client.stdout", "")


def step(run: Path, name: str, output: tuple[Path, str], scale: float = 1.0, nodes: list[str] = PAIR,
         refs=REFS, **tags) -> Record:
    """The record of a step that printed `output`; its judged figure times `scale` (a short run made from a
    real one), judged against `refs` as the runner judges it."""
    path, args = output
    tags = {"suite": "stack", "nodes": len(set(nodes)), "ntasks": 2, "memory": "host", "cxi_hook": True, **tags}
    sweep = parse_output(None, path.read_text(), shlex.split(args), ranks=2)
    metric = benchmarks.get(sweep.benchmark).metric
    sweep = dataclasses.replace(sweep, rows=[{**r, metric: r[metric] * scale} for r in sweep.rows])
    verdict = judge([sweep], tags, refs, metric, ALPS.node.nic_line_rate_MBps, ALPS.name)
    record = Record(run_id=run.name, index=len(list(run.glob("steps/*"))), suite="stack", system=ALPS.name,
                    step=name, benchmark=sweep.benchmark, tool=sweep.tool, tags=tags, metric=metric,
                    unit=METRICS[metric].unit, verdict=verdict.verdict, reason=verdict.reason,
                    detail=verdict.summary(), nodelist=nodes, repeats=[sweep.rows])
    record.write(run)
    return record


def failed_step(run: Path, name: str, benchmark: str, output: tuple[Path, str], nodes: list[str] = PAIR) -> Record:
    """The record of a step whose output the parser refuses: failed, with the error's kind."""
    path, args = output
    with pytest.raises(ParseError) as e:
        parse_output(benchmark, path.read_text(), shlex.split(args), ranks=2)
    b = benchmarks.get(benchmark)
    record = Record(run_id=run.name, index=len(list(run.glob("steps/*"))), suite="stack", system=ALPS.name,
                    step=name, benchmark=benchmark, tool=b.tool.name, tags={"nodes": 2, "memory": "host"},
                    metric=b.metric, unit=METRICS[b.metric].unit, verdict="fail", error_kind=e.value.kind,
                    reason=str(e.value), nodelist=nodes)
    record.write(run)
    return record


def compare_cli(capsys, a: Path, b: Path) -> tuple[int, str]:
    rc = commstack(["compare", str(a), str(b)])
    return rc, capsys.readouterr().out


def findings(out: str) -> list[str]:
    """The lines `compare` prints under 'lowest layer at fault:'."""
    return [line.strip() for line in out.split("lowest layer at fault:\n", 1)[1].splitlines()] if \
        "lowest layer at fault:\n" in out else []


def test_an_mpi_run_without_a_lower_layer_names_nothing(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    step(a, "osu_bw", OSU_BW)
    step(b, "osu_bw", OSU_BW_NO_CXI)
    rc, out = compare_cli(capsys, a, b)
    assert rc == 1 and "4194304        23.98        3.121 GB/s     0.130  regression" in out
    assert "lowest layer at fault" not in out
    commstack(["report", str(b)])
    assert "Lowest layer at fault" not in (b / "report" / "report.md").read_text()


def test_compare_names_mpi_when_only_osu_bw_is_short(tmp_path, capsys):
    """B: osu_bw without the CXI hook (a real run, 13 % of A at 4 MiB); fi_pingpong the same as in A."""
    a, b = tmp_path / "a", tmp_path / "b"
    for run, osu in ((a, OSU_BW), (b, OSU_BW_NO_CXI)):
        step(run, "fi_pingpong", FI_PINGPONG)
        step(run, "osu_bw", osu)
    rc, out = compare_cli(capsys, a, b)
    assert rc == 1, out
    assert findings(out) == [
        "stack/osu_bw on node1, node2: osu_bw reaches 3.12 GB/s at 4 MiB (13 % of A, 24.0 GB/s); fi_pingpong on "
        "the same nodes reaches 0.728 GB/s: the fabric is fine; look at MPI's transport (UCX_TLS, OMPI_MCA_pml)"]


def test_compare_names_the_fabric_when_both_are_short(tmp_path, capsys):
    """B: osu_bw without the CXI hook, and fi_pingpong at half its real figures (a short run made from it)."""
    a, b = tmp_path / "a", tmp_path / "b"
    step(a, "fi_pingpong", FI_PINGPONG)
    step(b, "fi_pingpong", FI_PINGPONG, scale=0.5)
    step(a, "osu_bw", OSU_BW)
    step(b, "osu_bw", OSU_BW_NO_CXI)
    rc, out = compare_cli(capsys, a, b)
    assert rc == 1, out
    assert findings(out) == [
        "stack/osu_bw on node1, node2: osu_bw reaches 3.12 GB/s at 4 MiB (13 % of A, 24.0 GB/s); fi_pingpong on "
        "the same nodes reaches 0.364 GB/s (50 % of A): the fabric"]


def test_the_report_names_the_fabric_when_fi_pingpong_cannot_carry_what_osu_bw_should_reach(tmp_path, capsys):
    """`commstack report` on Alps: osu_bw without the CXI hook is degraded (24.0 GB/s expected at 4 MiB); the
    fabric, with no reference of its own there, reaches 0.728 GB/s on the same nodes, far below it."""
    run = tmp_path / "run"
    step(run, "fi_pingpong", FI_PINGPONG)
    upper = step(run, "osu_bw", OSU_BW_NO_CXI)
    assert upper.verdict == "degraded"
    assert commstack(["report", str(run)]) == 1
    said = ("osu_bw reaches 3.12 GB/s at 4 MiB (13 % of the reference, 24.0 GB/s); fi_pingpong on the same "
            "nodes reaches 0.728 GB/s: the fabric")
    md = (run / "report" / "report.md").read_text()
    assert f"## Lowest layer at fault\n\n- `stack/osu_bw` on node1, node2: {said}\n" in md
    assert md.index("## Lowest layer at fault") < md.index("| step | verdict |")
    page = (run / "report" / "index.html").read_text()
    assert f"<li><code>stack/osu_bw</code> on node1, node2: {html.escape(said)}</li>" in page
    # the stack bottom up on the node pair, each step with its figure at its largest size
    assert ("## By layer, per node pair\n\n| nodes | layer | step | verdict | figure |\n|---|---|---|---|---|\n"
            "| node1, node2 | the fabric | `stack/fi_pingpong` | no-reference | 1.67 GB/s at 6 MiB |\n"
            "| node1, node2 | MPI | `stack/osu_bw` | degraded | 3.12 GB/s at 4 MiB |\n") in md
    assert ("<td>node1, node2</td><td>the fabric</td><td><code>stack/fi_pingpong</code></td>"
            "<td class='no-reference'>no-reference</td>") in page


REFERENCES = f"""system: alps-gh200
tolerance: {{lower: -0.10, upper: 0.15}}
references:
  - id: osu_bw-host-inter
    benchmark: osu_bw
    tags: {{memory: host, nodes: 2}}
    metric: bandwidth_MBps
    recorded: {OSU_BW[0]}
    sizes: [8192, 65536, 1048576, 4194304]
  - id: fi_pingpong-tcp
    benchmark: fi_pingpong
    tags: {{memory: host, nodes: 2}}
    metric: bandwidth_MBps
    recorded: {FI_PINGPONG[0]}
    sizes: [1048576, 4194304]
"""


@pytest.mark.parametrize("fabric_scale,said", [
    (1.0, "fi_pingpong on the same nodes reaches 0.728 GB/s: the fabric is fine; look at MPI's transport "
          "(UCX_TLS, OMPI_MCA_pml)"),
    (0.5, "fi_pingpong on the same nodes reaches 0.364 GB/s (50 % of its reference): the fabric"),
])
def test_the_report_holds_the_fabric_to_its_own_reference(tmp_path, fabric_scale, said):
    """References holding fi_pingpong to its recorded real run: the same run is fine, half of it is short."""
    (tmp_path / "refs.yaml").write_text(REFERENCES)
    refs = load_references(tmp_path / "refs.yaml")
    run = tmp_path / "run"
    step(run, "fi_pingpong", FI_PINGPONG, scale=fabric_scale, refs=refs)
    step(run, "osu_bw", OSU_BW_NO_CXI, refs=refs)
    page = write_report(run, refs, ALPS.node.nic_line_rate_MBps).read_text()
    head = "osu_bw reaches 3.12 GB/s at 4 MiB (13 % of the reference, 24.0 GB/s); "
    assert f"<li><code>stack/osu_bw</code> on node1, node2: {html.escape(head + said)}</li>" in page
    assert f"on node1, node2: {head}{said}\n" in (run / "report" / "report.md").read_text()


def test_ucx_in_the_middle_is_named_with_the_fabric_fine(tmp_path, capsys):
    """B: osu_bw without the CXI hook, ucx_perftest's tag_bw at half its real figures, fi_pingpong as in A.
    UCX prints MiB/s (471.79 at 1 MiB, 2119.606 us a message): 0.495 GB/s, and half of it 0.247 GB/s. UCX's own
    step is diagnosed too: it runs over the fabric."""
    a, b = tmp_path / "a", tmp_path / "b"
    for run, osu, scale in ((a, OSU_BW, 1.0), (b, OSU_BW_NO_CXI, 0.5)):
        step(run, "fi_pingpong", FI_PINGPONG)
        ucx = step(run, "ucx_perftest", UCX_TAG_BW, scale=scale).benchmark
        step(run, "osu_bw", osu)
    rc, out = compare_cli(capsys, a, b)
    assert rc == 1, out
    look = "UCX's transports and devices (UCX_TLS, UCX_NET_DEVICES, ucx_info -d)"
    assert findings(out) == [
        f"stack/ucx_perftest on node1, node2: {ucx} reaches 0.247 GB/s at 1 MiB (50 % of A, 0.495 GB/s); fi_pingpong "
        f"on the same nodes reaches 0.684 GB/s: the fabric is fine; look at {look}",
        f"stack/osu_bw on node1, node2: osu_bw reaches 3.12 GB/s at 4 MiB (13 % of A, 24.0 GB/s); fi_pingpong on "
        f"the same nodes reaches 0.728 GB/s; {ucx} reaches 0.247 GB/s at 1 MiB (50 % of A): the fabric is fine; "
        f"UCX: look at {look}"]


def test_a_failed_upper_step_is_told_by_the_layer_below(tmp_path, capsys):
    """osu_bw with 3 ranks (a real run: it aborts before any row) on the nodes where fi_pingpong ran."""
    run = tmp_path / "run"
    step(run, "fi_pingpong", FI_PINGPONG)
    osu = DATA / "osu" / "7.2" / "osu_bw-np3.stdout"
    text = osu.read_text() + osu.with_suffix(".stderr").read_text()
    (tmp_path / "transcript").write_text(text)
    failed_step(run, "osu_bw", "osu_bw", (tmp_path / "transcript", "-i 20 -x 2"))
    assert commstack(["report", str(run)]) == 1
    assert ("- `stack/osu_bw` on node1, node2: osu_bw failed (crashed); fi_pingpong on the same nodes reaches "
            "1.67 GB/s at 6 MiB: the fabric is fine; look at MPI's transport (UCX_TLS, OMPI_MCA_pml)\n"
            ) in (run / "report" / "report.md").read_text()


@pytest.mark.parametrize("fabric_nodes,osu_nodes", [
    (["node2", "node3"], PAIR),   # the fabric step ran on other nodes
    (["node1"], ["node1"]),       # within one node MPI does not use the fabric
])
def test_a_lower_step_elsewhere_tells_nothing(tmp_path, capsys, fabric_nodes, osu_nodes):
    run = tmp_path / "run"
    step(run, "fi_pingpong", FI_PINGPONG, nodes=fabric_nodes)
    step(run, "osu_bw", OSU_BW_NO_CXI, nodes=osu_nodes)
    commstack(["report", str(run)])
    assert "Lowest layer at fault" not in (run / "report" / "report.md").read_text()


def test_a_latency_is_held_to_the_layer_below_in_microseconds(tmp_path, capsys):
    """osu_latency between two namespace nodes (a real run, 30.74 us at 8 B), in B three times slower (a short run
    made from it); ucx_perftest's tag_lat over tcp between two namespace nodes in both (its real output, after the
    line the pair launcher writes first, made from its recorded client command). fi_pingpong measures a bandwidth:
    it is not taken for a latency."""
    lat = DATA / "osu" / "5.7" / "osu_latency-srun-nersc10-N2-n2.stdout", "-i 10000 -x 0 -m 8:8"
    ucx = DATA / "ucx_perftest" / "1.13" / "tag_lat-8-tcp-netns.client.stdout"
    client = "ucx_perftest 10.99.5.1 -p 13420 -t tag_lat -s 8 -n 2000"
    (tmp_path / "tag_lat").write_text(f"# commstack pair client: {client}\n" + ucx.read_text())
    a, b = tmp_path / "a", tmp_path / "b"
    for run, scale in ((a, 1.0), (b, 3.0)):
        step(run, "fi_pingpong", FI_PINGPONG)
        name = step(run, "ucx_perftest", (tmp_path / "tag_lat", "")).benchmark
        step(run, "osu_latency", lat, scale=scale)
    rc, out = compare_cli(capsys, a, b)
    assert rc == 1, out
    assert findings(out) == [
        f"stack/osu_latency on node1, node2: osu_latency reaches 92.2 µs at 8 B (300 % of A, 30.7 µs); {name} on the "
        "same nodes reaches 579 µs: UCX is fine; look at MPI's transport (UCX_TLS, OMPI_MCA_pml)"]


def test_a_bidirectional_bandwidth_asks_each_direction_for_half(tmp_path):
    """osu_bibw between two namespace nodes (a real run, 1214.93 MB/s at 1 MiB both ways) is its own reference;
    the run at half of it (a short run made from it) asks 0.607 GB/s of each direction, which fi_pingpong on the
    same nodes (0.684 GB/s at 1 MiB, no reference of its own) carries."""
    bibw = DATA / "osu" / "5.7" / "osu_bibw-srun-nersc10-N2-n2.stdout", "-i 1000 -x 0 -m 1048576:1048576"
    (tmp_path / "refs.yaml").write_text(f"system: alps-gh200\nreferences:\n- {{id: bibw, benchmark: osu_bibw, tags: "
                                        f"{{nodes: 2}}, metric: bandwidth_MBps, recorded: {bibw[0]}}}\n")
    refs = load_references(tmp_path / "refs.yaml")
    run = tmp_path / "run"
    step(run, "fi_pingpong", FI_PINGPONG, refs=refs)
    step(run, "osu_bibw", bibw, scale=0.5, refs=refs)
    write_report(run, refs)
    assert ("- `stack/osu_bibw` on node1, node2: osu_bibw reaches 0.607 GB/s both ways at 1 MiB (50 % of the "
            "reference, 1.21 GB/s); fi_pingpong on the same nodes reaches 0.684 GB/s: the fabric is fine; look at "
            "MPI's transport (UCX_TLS, OMPI_MCA_pml)\n") in (run / "report" / "report.md").read_text()


@pytest.mark.parametrize("failed_in_a", [False, True])
def test_compare_names_a_step_that_fails_in_b_only(tmp_path, capsys, failed_in_a):
    """osu_bw with 3 ranks (a real run that aborts before any row) in B, and in A too or not."""
    osu = DATA / "osu" / "7.2" / "osu_bw-np3.stdout"
    (tmp_path / "transcript").write_text(osu.read_text() + osu.with_suffix(".stderr").read_text())
    a, b = tmp_path / "a", tmp_path / "b"
    for run in (a, b):
        step(run, "fi_pingpong", FI_PINGPONG)
        if run == a and not failed_in_a:
            step(a, "osu_bw", OSU_BW)
        else:
            failed_step(run, "osu_bw", "osu_bw", (tmp_path / "transcript", "-i 20 -x 2"))
    rc, out = compare_cli(capsys, a, b)
    assert findings(out) == ([] if failed_in_a else [
        "stack/osu_bw on node1, node2: osu_bw failed (crashed); fi_pingpong on the same nodes reaches 1.67 GB/s at "
        "6 MiB: the fabric is fine; look at MPI's transport (UCX_TLS, OMPI_MCA_pml)"]), out


def test_the_first_step_of_a_layer_on_the_nodes_is_taken(tmp_path):
    """Two fabric steps on the same nodes: fi_pingpong through the pair launcher (its six default sizes, up to
    1 MiB: 81.91 MB/s) first, then with -S all: the first tells, at its size nearest to 4 MiB."""
    run = tmp_path / "run"
    step(run, "fi_pingpong", (DATA / "fi_pingpong" / "1.17" / "pair-slurm-netns.client.stdout", ""))
    step(run, "fi_pingpong-all", FI_PINGPONG)
    step(run, "osu_bw", OSU_BW_NO_CXI)
    (finding,) = diagnose(read_run(run), against_references(read_run(run), REFS))
    assert finding.message.endswith("; fi_pingpong on the same nodes reaches 0.0819 GB/s at 1 MiB: the fabric")


def test_sizes_and_tolerances_as_the_sentences_use_them():
    assert [size_text(s) for s in (0, 8, 1000, 1024, 1536, 65536, 6 << 20, 1 << 30, (1 << 30) + 1024)] == [
        "0 B", "8 B", "1000 B", "1 KiB", "1536 B", "64 KiB", "6 MiB", "1 GiB", "1048577 KiB"]
    # a rate 10 % short with a tolerance of 10 % is within it, a time 10 % long too; 0 and NaN are never
    rates = [(0.9, 1.0, 0.1), (0.89, 1.0, 0.1), (0.5, 0.5, 0.0)]
    times = [(1.1, 1.0, 0.1), (1.11, 1.0, 0.1), (0.5, 1.0, 0.1)]
    assert [_worse(True, *r) for r in rates] == [_worse(False, *t) for t in times] == [False, True, False]
    assert _worse(True, 0.0, 1.0, 0.1) and _worse(False, 0.0, 1.0, 0.1) and _worse(True, math.nan, 1.0, 0.1)


def test_the_lower_step_with_the_same_memory_then_the_first_in_the_run_in_any_order(tmp_path):
    """Records in any order (compare reads two runs): the fabric step with the upper step's memory tells, before
    one that ran first with another memory; of two with the same memory, the first in the run."""
    run = tmp_path / "run"
    step(run, "fi_pingpong", (DATA / "fi_pingpong" / "1.17" / "pair-slurm-netns.client.stdout", ""), memory="device")
    step(run, "fi_pingpong-all", FI_PINGPONG)
    step(run, "osu_bw", OSU_BW_NO_CXI)
    records = read_run(run)
    for order in (records, records[::-1]):
        (finding,) = diagnose(order, against_references(order, REFS))
        assert finding.message.endswith("; fi_pingpong on the same nodes reaches 0.728 GB/s: the fabric"), order
    for r in records:
        r.tags["memory"] = "host"
    for order in (records, records[::-1]):
        (finding,) = diagnose(order, against_references(order, REFS))
        assert finding.message.endswith("; fi_pingpong on the same nodes reaches 0.0819 GB/s at 1 MiB: the fabric")


def test_the_by_layer_table_holds_only_steps_between_nodes(tmp_path):
    from commstack.results.diagnosis import by_layer
    run = tmp_path / "run"
    step(run, "fi_pingpong-one-node", FI_PINGPONG, nodes=["node1"])
    step(run, "fi_pingpong", FI_PINGPONG)
    step(run, "osu_bw", OSU_BW_NO_CXI)
    records = read_run(run)
    for order in (records, records[::-1]):  # bottom up, whatever order the steps ran in
        [(nodes, rows)] = by_layer(order)
        assert nodes == ("node1", "node2")
        assert [(layer, r.step, figure) for layer, r, figure in rows] == [
            ("the fabric", "fi_pingpong", "1.67 GB/s at 6 MiB"), ("MPI", "osu_bw", "3.12 GB/s at 4 MiB")]


#: each unit a judged metric is in, as a quantity and its factor to B/s or s; the others (%, msg/s, a count) none
SI = {"MB/s": ("bandwidth", 1e6), "GB/s": ("bandwidth", 1e9), "GiB/s": ("bandwidth", 1 << 30),
      "s": ("time", 1.0), "ms": ("time", 1e-3), "us": ("time", 1e-6)}


@pytest.mark.parametrize("metric", sorted(METRICS))
def test_every_metric_compares_across_layers_in_si_units(metric):
    from types import SimpleNamespace
    from commstack.results.diagnosis import quantity, si
    record = SimpleNamespace(unit=benchmarks.COLUMNS[metric].unit)
    kind, factor = SI.get(record.unit, (None, None))
    assert quantity(record) == kind
    if kind:
        assert si(record, 1500.0) == pytest.approx(1500.0 * factor, rel=1e-12)


UCX_TAG_LAT = (DATA / "ucx_perftest" / "1.13" / "pair-loaded-tag_lat-8.client.stdout", "")
OSU_LATENCY = (SEEDS / "cscs-osu-07.txt", "")  # Alps' osu_latency, its reference's recording


def test_a_slow_latency_is_headlined_at_its_smallest_size(tmp_path):
    """A time's headline is its smallest size (a rate's its largest): the finding and the by-layer table."""
    from commstack.results.diagnosis import by_layer
    run = tmp_path / "run"
    step(run, "ucx_perftest-tag_lat", UCX_TAG_LAT)
    step(run, "osu_latency", OSU_LATENCY, scale=2.0)  # twice its reference at 8 B, 8 KiB and 1 MiB
    records = read_run(run)
    (finding,) = diagnose(records, against_references(records, REFS))
    assert finding.message == (
        "osu_latency reaches 6.68 µs at 8 B (200 % of the reference, 3.34 µs); ucx_perftest-tag_lat on the same "
        "nodes reaches 4002 µs: UCX: look at UCX's transports and devices (UCX_TLS, UCX_NET_DEVICES, ucx_info -d)")
    [(_, rows)] = by_layer(records)
    assert [(layer, figure) for layer, _, figure in rows] == [("UCX", "4002 µs at 8 B"), ("MPI", "6.68 µs at 1 B")]


def test_a_failed_lower_step_is_the_layer_at_fault(tmp_path):
    run = tmp_path / "run"
    failed_step(run, "fi_pingpong", "fi_pingpong", (DATA / "fi_pingpong" / "1.17" / "bad-provider.server.stderr", ""))
    step(run, "osu_bw", OSU_BW_NO_CXI)
    records = read_run(run)
    (finding,) = diagnose(records, against_references(records, REFS))
    assert finding.message.endswith("; fi_pingpong on the same nodes failed (crashed): the fabric"), finding


@pytest.mark.parametrize("kind, value, text", [
    ("time", 100e-6, "100 µs"), ("time", 99.94e-6, "99.9 µs"), ("time", 100.6e-6, "101 µs"),
    ("time", 1.5e-6, "1.50 µs"), ("bandwidth", 24e9, "24.0 GB/s"), ("bandwidth", 100e9, "100 GB/s"),
    ("bandwidth", 123.4e9, "123 GB/s")])
def test_figures_are_shown_to_three_digits_and_whole_from_100(kind, value, text):
    from commstack.results.diagnosis import shown
    assert shown(kind, value) == text


@pytest.mark.parametrize("bench", sorted(n for n, b in benchmarks.BENCHMARKS.items()
                                         if METRICS[b.metric].unit in ("MB/s", "GB/s", "GiB/s")))
def test_a_bandwidth_counts_both_directions_only_for_a_bidirectional_test(bench):
    """osu_bibw's figure is both ways at once: a layer below must carry half of it each way."""
    from types import SimpleNamespace
    from commstack.results.diagnosis import directions
    b = benchmarks.BENCHMARKS[bench]
    record = SimpleNamespace(benchmark=bench, unit=METRICS[b.metric].unit)
    assert directions(record) == (2 if bench == "osu_bibw" else 1)
