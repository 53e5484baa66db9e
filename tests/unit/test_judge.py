"""Judging against the alps-gh200 references built from the seeds' own tables."""


import pytest

from commstack.paths import TOP
from commstack.errors import CommstackError, ConfigError
from commstack.results.judge import judge, load_references
from commstack.results.parse import parse_nccl, parse_osu

HERE = TOP / "systems" / "references"
SEEDS = HERE / "seeds"
REFS = load_references(HERE / "alps-gh200.yaml")
INTER = {"memory": "host", "nodes": 2, "cxi_hook": True}


def osu(name):
    return parse_osu((SEEDS / name).read_text())[0]


def test_references_come_from_the_seed_tables():
    ref = REFS.find("osu_bw", INTER)
    assert ref.points == {8192: 6972.95, 65536: 22049.82, 1048576: 23883.95, 4194304: 23982.18}
    assert REFS.find("all_reduce_perf", {"nodes": 2, "ranks_per_node": 4, "aws_ofi_nccl_hook": True}).points[
        134217728] == 122.57


def test_seed_run_passes_its_own_reference():
    v = judge([osu("cscs-osu-01.txt")], INTER, REFS, "bandwidth_MBps", line_rate_MBps=25000)
    assert v.verdict == "pass" and v.failures == [] and v.diagnosis == []


def test_no_cxi_run_is_degraded_with_diagnosis():
    v = judge([osu("cscs-osu-10.txt")], INTER, REFS, "bandwidth_MBps", line_rate_MBps=25000)
    assert v.verdict == "degraded"
    assert v.points[-1].ratio == pytest.approx(3121.42 / 23982.18)
    assert len(v.diagnosis) == 1 and "CXI hook" in v.diagnosis[0]


def test_no_aws_ofi_nccl_run_is_diagnosed():
    s = parse_nccl((SEEDS / "cscs-nccl-02.txt").read_text())
    v = judge([s], {"nodes": 2, "ranks_per_node": 4, "aws_ofi_nccl_hook": True}, REFS, "oop_busbw_GBps")
    assert v.verdict == "degraded" and "aws-ofi-nccl plugin is not loaded" in v.diagnosis[0]


def test_latency_lower_is_better():
    v = judge([osu("cscs-osu-12.txt")], INTER, REFS, "latency_us")  # no-cxi latency: 28.9 us vs 3.34
    assert v.verdict == "degraded" and v.points[3].reason.startswith("29.13 us vs reference 3.34")


def test_bandwidth_above_line_rate_is_an_error_not_a_success():
    s = osu("cscs-osu-01.txt")
    for r in s.rows:
        r["bandwidth_MBps"] *= 1.2  # 28.8 GB/s through a 25 GB/s NIC
    v = judge([s], INTER, REFS, "bandwidth_MBps", line_rate_MBps=25000)
    assert v.verdict == "fail" and "above the physical limit 25000 MB/s" in v.points[-1].reason


def test_repeats_median_and_unstable_instead_of_flapping():
    runs = [osu("cscs-osu-01.txt") for _ in range(3)]
    runs[1].rows[-1]["bandwidth_MBps"] = 20000.0  # one slow repeat at 4 MiB
    v = judge(runs, INTER, REFS, "bandwidth_MBps", line_rate_MBps=25000)
    last = v.points[-1]
    assert last.median == 23982.18 and last.spread == pytest.approx((23982.18 - 20000) / 23982.18)
    assert last.status == "unstable" and v.verdict == "unstable"


def test_unknown_tags_have_no_reference():
    v = judge([osu("cscs-osu-01.txt")], {"memory": "host", "nodes": 64}, REFS, "bandwidth_MBps")
    assert v.verdict == "no-reference" and all(p.reference is None for p in v.points)
    assert v.reason == "alps-gh200 has no reference for osu_bw memory=host, nodes=64"


def test_a_system_without_references_is_judged_on_correctness_and_says_so():
    """local and local-multinode declare no references: a pass there says it checked correctness only."""
    from commstack.config import load_system
    from commstack.run.runner import conclude, new_record
    from commstack.run.steps import SuiteStep

    system = load_system("local-multinode")
    assert system.references is None
    s = SuiteStep("osu_bw-N2-n2-host-native", "osu_bw", "osu", None, tags={"suite": "t", **INTER})
    record = new_record("run", 0, s, system)
    conclude(s, record, [osu("cscs-osu-01.txt")], "", {}, system, None)
    assert (record.verdict, record.reason) == ("pass", "correctness only: system local-multinode has no references")


def test_zero_latency_is_not_a_measurement():
    s = osu("cscs-osu-07.txt")
    s.rows[0]["latency_us"] = 0.0
    v = judge([s], INTER, None, "latency_us")
    assert v.verdict == "fail" and v.reason == f"osu_latency: latency_us is 0.0 at {s.rows[0]['size']} B: not a measurement"


def test_sizes_the_reference_holds_but_the_run_lacks_fail():
    s = osu("cscs-osu-01.txt")
    s.rows = [r for r in s.rows if r["size"] <= 65536]  # cut before 1 MiB
    v = judge([s], INTER, REFS, "bandwidth_MBps", line_rate_MBps=25000)
    assert v.verdict == "fail" and "no result at 1048576, 4194304 B" in v.reason


def test_empty_result_set():
    with pytest.raises(CommstackError, match="nothing to judge"):
        judge([], INTER, REFS, "bandwidth_MBps")


@pytest.mark.parametrize("body,match", [
    ("system: s\nreferences: [{id: x, benchmark: osu_bw, metric: speed, points: {8: 1}}]", "unknown metric 'speed'"),
    ("system: s\nreferences: [{id: x, benchmark: osu_bw, metric: latency_us, recorded: nope.txt}]",
     "recorded output nope.txt: .*nope.txt: cannot read: No such file"),
    ("system: s\nreferences: [{id: x, benchmark: osu_bw, metric: latency_us}]",
     "references.0: Value error, give exactly one of `recorded`"),
    ("system: s\nrefs: []", r"references: required key is missing\n  refs: unknown key"),
    ("system: s\nreferences: [{id: x, benchmark: osu_bw, metric: latency_us, points: {8: fast}}]",
     r"references.0.points.8: Input should be a valid number"),
    ("references: [", "not valid YAML"),
])
def test_malformed_reference_file(tmp_path, body, match):
    f = tmp_path / "r.yaml"
    f.write_text(body)
    with pytest.raises(ConfigError, match=match):
        load_references(f)


def test_a_rate_of_zero_is_never_a_pass():
    def zeroed(*sizes, seed="cscs-osu-01.txt"):
        s = osu(seed)
        for r in s.rows:
            if r["size"] in sizes or not sizes:
                r["bandwidth_MBps"] = 0.0
        return judge([s], INTER, REFS, "bandwidth_MBps", line_rate_MBps=25000)
    v = zeroed(8192)  # a size the reference holds
    assert v.verdict == "fail" and v.reason == ("8192 B: bandwidth_MBps is 0 where reference osu_bw-host-inter "
                                               "holds 6972.95 MB/s: no data moved")
    v = zeroed(2048)  # no reference there, but 0.00 MB/s for 2 KiB is no measurement
    assert v.verdict == "fail" and v.reason == "osu_bw: bandwidth_MBps is 0.0 at 2048 B: not a measurement"
    assert zeroed(1, 2).verdict == "pass"  # tiny messages may print 0.00, as nccl-tests does at 8 B
    v = judge([osu("cscs-osu-01.txt")], INTER, None, "bandwidth_MBps")
    s = osu("cscs-osu-01.txt")
    s.rows = s.rows[:4]
    for r in s.rows:
        r["bandwidth_MBps"] = 0.0
    v = judge([s], INTER, None, "bandwidth_MBps")
    assert v.verdict == "fail" and v.reason == "osu_bw: bandwidth_MBps is 0 at every size: no data moved"
