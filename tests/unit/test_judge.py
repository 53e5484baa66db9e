"""Judging against the alps-gh200 references built from the seeds' own tables."""


import pytest

from commstack.benchmarks import BENCHMARKS
from commstack.paths import TOP
from commstack.errors import CommstackError, ConfigError
from commstack.results.judge import check_correctness, judge
from commstack.results.references import load_references
from commstack.results.parse import parse_tables
from commstack.tools.osu import parse_osu

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


def scaled(name: str, factor: float, metric: str):
    """A seed's table with every figure of `metric` times `factor`, as a slower or faster run prints it."""
    s = osu(name)
    for r in s.rows:
        r[metric] = round(r[metric] * factor, 2)
    return s


def test_seed_run_passes_its_own_reference():
    v = judge([osu("cscs-osu-01.txt")], INTER, REFS, "bandwidth_MBps", line_rate_MBps=25000)
    assert (v.verdict, v.reason, v.failures, v.diagnosis) == ("pass", "", [], [])
    assert [(p.size, p.reference, p.ratio) for p in v.points if p.reference] == [
        (8192, 6972.95, 1.0), (65536, 22049.82, 1.0), (1048576, 23883.95, 1.0), (4194304, 23982.18, 1.0)]


@pytest.mark.parametrize("factor,verdict,reason", [
    (0.95, "pass", ""),
    (0.89, "degraded", "8192 B: 6205.93 MB/s vs reference 6972.95 (-11.0%, allowed -10%)"),
    (1.14, "pass", ""),
    (1.16, "unstable", "8192 B: 8088.62 MB/s is better than reference 6972.95 by +16.0%: check the run "
                       "(cached buffers, wrong placement)"),
])
def test_bandwidth_within_and_outside_the_tolerance(factor, verdict, reason):
    """osu_bw (higher is better) at 95 % and 89 % of its reference, and 14 % and 16 % above it."""
    v = judge([scaled("cscs-osu-01.txt", factor, "bandwidth_MBps")], INTER, REFS, "bandwidth_MBps")
    assert (v.verdict, v.reason) == (verdict, reason)
    assert v.points[-1].ratio == pytest.approx(factor, abs=1e-3)


@pytest.mark.parametrize("factor,verdict,reason", [
    (1.0, "pass", ""),
    (1.1, "pass", ""),  # 10 % slower: -9.1 %, within the latency reference's -15 %
    (1.2, "degraded", "8 B: 4.01 us vs reference 3.34 (-16.7%, allowed -15%)"),
    (0.8, "unstable", "8 B: 2.67 us is better than reference 3.34 by +25.1%: check the run (cached buffers, "
                      "wrong placement)"),
])
def test_latency_against_its_reference_lower_is_better(factor, verdict, reason):
    v = judge([scaled("cscs-osu-07.txt", factor, "latency_us")], INTER, REFS, "latency_us")
    assert (v.verdict, v.reason) == (verdict, reason)
    assert [p.size for p in v.points if p.reference] == [8, 8192, 1048576]


def test_two_references_that_both_match_are_an_error(tmp_path):
    f = tmp_path / "refs.yaml"
    f.write_text("system: s\nreferences:\n"
                 "  - {id: a, benchmark: osu_bw, tags: {nodes: 2}, metric: bandwidth_MBps, points: {8192: 6972.95}}\n"
                 "  - {id: b, benchmark: osu_bw, tags: {memory: host}, metric: bandwidth_MBps, points: {8192: 7000}}\n")
    refs = load_references(f)
    with pytest.raises(ConfigError, match=r"s: references \['a', 'b'\] all match osu_bw"):
        judge([osu("cscs-osu-01.txt")], INTER, refs, "bandwidth_MBps")
    assert refs.find("osu_bw", {"nodes": 2}).id == "a" and refs.find("osu_bw", {"nodes": 1}) is None


@pytest.mark.parametrize("value,diagnosed", [(4608.0, True), (4608.5, False), (1536.0, True), (1535.5, False)])
def test_the_diagnosis_window(value, diagnosed):
    """A diagnosis applies within `within` of its expected bad value, both sides, ends included."""
    refs = load_references(HERE / "alps-gh200.yaml")
    (d,) = [d for d in refs.diagnoses if d.benchmark == "osu_bw"]
    refs.diagnoses[refs.diagnoses.index(d)] = d.model_copy(update={"value": 3072.0})  # the window: 1536..4608 MB/s
    s = osu("cscs-osu-10.txt")
    s.rows[-1]["bandwidth_MBps"] = value
    v = judge([s], INTER, refs, "bandwidth_MBps")
    assert v.diagnosis == ([f"4194304 B at {value:g}: {d.message}"] if diagnosed else [])
    assert judge([s], {**INTER, "nodes": 1}, refs, "bandwidth_MBps").diagnosis == []  # the diagnosis's tags


@pytest.mark.parametrize("slow,repeats,verdict", [(0.85, 3, "unstable"), (0.91, 3, "pass"), (0.85, 2, "pass")])
def test_repeats_that_spread_are_unstable_also_without_references(slow, repeats, verdict):
    """local has no references: three repeats spreading more than 10 % are unstable there too; two
    repeats cannot show a spread."""
    runs = [osu("cscs-osu-01.txt") for _ in range(repeats)]
    runs[0].rows[-1]["bandwidth_MBps"] = 23982.18 * slow
    v = judge(runs, INTER, None, "bandwidth_MBps", system="local")
    assert v.verdict == verdict
    assert v.reason == ("correctness only: system local has no references" if verdict == "pass" else
                        "4194304 B: repeats spread 15.0% around median 23982.2")


def nccl_seed(old: str = "", new: str = "", cut: str | None = None):
    text = (SEEDS / "cscs-nccl-01.txt").read_text()
    if old:
        assert text.count(old) == 1
        text = text.replace(old, new)
    return parse_tables(text[:text.index(cut)] if cut else text)[0]


def test_correctness_names_wrong_elements_out_of_bounds_values_and_a_cut_output():
    row = ("134217728      33554432     float     sum      -1   1916.4   70.04  122.57      0   1907.8   70.35  "
           "123.11      0")
    assert check_correctness(nccl_seed()) == []
    wrong = nccl_seed(row, row[:-1] + "5")
    assert check_correctness(wrong) == [row[:-1] + "5", "all_reduce_perf: 5 wrong elements (ip_wrong) at 134217728 B"]
    oop = row.replace("122.57      0", "122.57      7")
    assert check_correctness(nccl_seed(row, oop))[1:] == [
        "all_reduce_perf: 7 wrong elements (oop_wrong) at 134217728 B"]
    assert check_correctness(nccl_seed("values : 0 OK", "values : 3 FAILED")) == ["# Out of bounds values : 3 FAILED"]
    assert check_correctness(nccl_seed(cut="# Out of bounds")) == [
        "all_reduce_perf: output ends before the benchmark's end line (sweep stopped early)"]
    v = judge([nccl_seed(cut="# Out of bounds")], {"nodes": 2, "ranks_per_node": 4, "aws_ofi_nccl_hook": True},
              REFS, "oop_busbw_GBps")
    assert (v.verdict, v.reason) == ("fail", "all_reduce_perf: output ends before the benchmark's end line "
                                             "(sweep stopped early)")


def test_no_cxi_run_is_degraded_with_diagnosis():
    v = judge([osu("cscs-osu-10.txt")], INTER, REFS, "bandwidth_MBps", line_rate_MBps=25000)
    assert v.verdict == "degraded"
    assert v.points[-1].ratio == pytest.approx(3121.42 / 23982.18)
    assert len(v.diagnosis) == 1 and "CXI hook" in v.diagnosis[0]


def test_no_aws_ofi_nccl_run_is_diagnosed():
    [s] = parse_tables((SEEDS / "cscs-nccl-02.txt").read_text())
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
    from commstack.run.lifecycle import evaluate
    from commstack.run.steps import SuiteStep

    system = load_system("local-multinode")
    assert system.references is None
    s = SuiteStep("osu_bw-N2-n2-host-native", "osu_bw", "osu", None, tags={"suite": "t", **INTER})
    record = evaluate(s, [osu("cscs-osu-01.txt")], "", {}, system, None)
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
    v = judge([osu("cscs-osu-01.txt")], INTER, None, "bandwidth_MBps", system="local")  # the seed as recorded
    assert (v.verdict, v.reason) == ("pass", "correctness only: system local has no references")
    s = osu("cscs-osu-01.txt")
    s.rows = s.rows[:4]
    for r in s.rows:
        r["bandwidth_MBps"] = 0.0
    v = judge([s], INTER, None, "bandwidth_MBps")
    assert v.verdict == "fail" and v.reason == "osu_bw: bandwidth_MBps is 0 at every size: no data moved"


def refs_file(tmp_path, body: str):
    f = tmp_path / "refs.yaml"
    f.write_text("system: s\ntolerance: {lower: -0.5, upper: 0.25}\n" + body)
    return load_references(f)


def test_the_tolerance_ends_are_allowed(tmp_path):
    """Exactly at the lower and upper tolerance is still a pass (binary fractions: exact ratios)."""
    refs = refs_file(tmp_path, "references: [{id: r, benchmark: osu_bw, metric: bandwidth_MBps, points: {8192: 8000}}]")
    s = osu("cscs-osu-01.txt")
    for value, verdict in ((4000.0, "pass"), (3999.0, "degraded"), (10000.0, "pass"), (10001.0, "unstable")):
        s.row(8192)["bandwidth_MBps"] = value
        assert judge([s], INTER, refs, "bandwidth_MBps").verdict == verdict, value


def test_a_reference_from_a_recorded_output_with_several_tables_takes_the_first(tmp_path):
    refs = refs_file(tmp_path, f"references: [{{id: r, benchmark: osu_allreduce, metric: latency_us, "
                               f"recorded: {SEEDS / 'nersc10-archer2.txt'}, sizes: [8]}}]")
    assert refs.references[0].points == {8: 33.58}


@pytest.mark.parametrize("body,match", [
    ("references: [{id: r, benchmark: osu_bw, metric: bandwidth_MBps, recorded: SEED, sizes: [3]}]",
     r"references.0 \(r\): SEED has osu_bw: no row for size 3"),
    ("references: []\ndiagnoses: [{benchmark: osu_bw, metric: bandwidth_MBps, size: 3, recorded: SEED, within: 0.5, "
     "message: m}]", r"diagnoses.0: SEED has osu_bw: no row for size 3"),
    ("references: [{id: r, benchmark: osu_bw, metric: bandwidth_MBps, recorded: BAD}]",
     r"references.0 \(r\): recorded output BAD: no benchmark title: .* \(line 1: .this is no benchmark output.\)"),
])
def test_a_recorded_output_that_lacks_the_size_or_does_not_parse(tmp_path, body, match):
    bad = tmp_path / "bad.txt"
    bad.write_text("this is no benchmark output\n")
    seed = str(SEEDS / "cscs-osu-01.txt")
    with pytest.raises(ConfigError, match=match.replace("SEED", seed).replace("BAD", str(bad))):
        refs_file(tmp_path, body.replace("SEED", seed).replace("BAD", str(bad)))


def test_the_summary_lists_the_points_that_did_not_pass_and_the_diagnosis():
    v = judge([osu("cscs-osu-10.txt")], INTER, REFS, "bandwidth_MBps", line_rate_MBps=25000)
    lines = v.summary().splitlines()
    assert lines[0] == ("osu_bw [bandwidth_MBps]: degraded - 8192 B: 468.55 MB/s vs reference 6972.95 "
                        "(-93.3%, allowed -10%)")
    assert [line.split(":")[0] for line in lines[1:5]] == ["  8192 B", "  65536 B", "  1048576 B", "  4194304 B"]
    assert lines[5].startswith("  diagnosis: 4194304 B at 3121.42: osu_bw near 3 GB/s") and len(lines) == 6
    ok = judge([osu("cscs-osu-01.txt")], INTER, REFS, "bandwidth_MBps")
    assert ok.summary() == "osu_bw [bandwidth_MBps]: pass"


def test_line_rate_only_between_nodes_and_up_to_the_rate_itself():
    s = scaled("cscs-osu-01.txt", 1.2, "bandwidth_MBps")  # 28.8 GB/s at 4 MiB
    assert judge([s], {"nodes": 1}, None, "bandwidth_MBps", line_rate_MBps=25000).verdict == "pass"  # shared memory
    assert judge([s], {}, None, "bandwidth_MBps", line_rate_MBps=25000).verdict == "pass"  # one node unless told
    assert judge([s], {"nodes": 2}, None, "bandwidth_MBps", line_rate_MBps=25000).verdict == "fail"
    at = osu("cscs-osu-01.txt")
    at.rows[-1]["bandwidth_MBps"] = 25000.0
    assert judge([at], {"nodes": 2}, None, "bandwidth_MBps", line_rate_MBps=25000).verdict == "pass"


def test_values_that_are_no_measurement():
    s = osu("cscs-osu-07.txt")
    s.row(8)["latency_us"] = -0.5
    assert judge([s], INTER, None, "latency_us").reason == "osu_latency: latency_us is -0.5 at 8 B: not a measurement"
    empty = osu("cscs-osu-07.txt")
    empty.rows = []
    v = judge([empty], INTER, None, "latency_us")
    assert (v.verdict, v.failures) == ("fail", ["osu_latency: no data rows"])
    fast = osu("cscs-osu-07.txt")
    fast.row(8)["latency_us"] = 0.9  # below 1 us at a size the reference holds: a measurement, suspiciously good
    v = judge([fast], INTER, REFS, "latency_us")
    assert (v.verdict, v.points[3].status) == ("unstable", "unstable")


def test_the_reason_is_the_worst_points_and_the_first_failure():
    runs = [osu("cscs-osu-01.txt") for _ in range(3)]
    runs[0].rows[0]["bandwidth_MBps"] = 0.5  # 1 B spreads: unstable there
    for r in runs:
        r.rows[-1]["bandwidth_MBps"] = 19000.0  # 4 MiB 21 % down in every repeat: degraded
    v = judge(runs, INTER, REFS, "bandwidth_MBps")
    assert v.verdict == "degraded" and v.reason.startswith("4194304 B: 19000 MB/s vs reference 23982.2")
    assert (v.points[0].status, v.points[0].spread) == ("unstable", pytest.approx((0.95 - 0.5) / 0.95))
    cut = nccl_seed(cut="# Out of bounds")
    cut.row(134217728)["oop_busbw_GBps"] = 0.0
    v = judge([cut], {"nodes": 2}, None, "oop_busbw_GBps")
    assert v.failures[1:] == ["all_reduce_perf: oop_busbw_GBps is 0.0 at 134217728 B: not a measurement"]
    assert v.reason == v.failures[0] == ("all_reduce_perf: output ends before the benchmark's end line (sweep "
                                         "stopped early)")


@pytest.mark.parametrize("line, verdict", [("", "unstable"), ("unstable_spread: 0.2\n", "no-reference")])
def test_a_references_file_without_its_own_spread_takes_ten_percent(tmp_path, line, verdict):
    """Three repeats of 4 MiB spreading 15 % (as above), judged against a references file that holds no point
    of theirs: the file's unstable_spread, 10 % where it names none."""
    path = tmp_path / "refs.yaml"
    path.write_text(f"system: x\n{line}references:\n- {{id: lat, benchmark: osu_latency, metric: latency_us, "
                    "tags: {}, points: {8: 1.0}}\n")
    runs = [osu("cscs-osu-01.txt") for _ in range(3)]
    runs[0].rows[-1]["bandwidth_MBps"] = 23982.18 * 0.85
    assert judge(runs, INTER, load_references(path), "bandwidth_MBps").verdict == verdict


def test_spread_at_the_limit_and_of_zero_medians():
    runs = [osu("cscs-osu-01.txt") for _ in range(3)]
    for r, value in zip(runs, (100.0, 100.0, 90.0)):
        r.rows[0]["bandwidth_MBps"] = value  # spread exactly 10 %: not more than allowed
    for r in runs:
        r.rows[1]["bandwidth_MBps"] = 0.0  # 2 B prints 0.00 in every repeat: no spread
    v = judge(runs, INTER, None, "bandwidth_MBps", system="local")
    assert v.verdict == "pass" and (v.points[0].spread, v.points[1].spread) == (0.1, 0.0)


def test_a_systems_malformed_references_file_is_named_with_the_system(tmp_path):
    from commstack.config import load_system
    from commstack.results.references import references_of

    bad = tmp_path / "refs.yaml"
    bad.write_text("references: [")
    system = load_system("alps-gh200").model_copy(update={"references": bad})
    with pytest.raises(ConfigError, match=r"alps-gh200.yaml: references: .*refs.yaml.*not valid YAML"):
        references_of(system)


#: how many NIC line rates one pair's figure can reach: one way, or both ways at once (osu_bibw)
LINE_RATE = {"osu_bw": ("osu/7.2/osu_bw-T_all.stdout", 1), "osu_bibw": ("osu/7.2/osu_bibw.stdout", 2),
             "fi_pingpong": ("fi_pingpong/1.17/tcp-rdm.client.stdout", 1),
             "ucx_perftest-tag_bw": ("ucx_perftest/1.13/pair-slurm-netns-tag_bw.client.stdout", 1)}


def test_every_bandwidth_benchmark_has_its_line_rate_factor():
    assert {n: b.line_rate_factor for n, b in BENCHMARKS.items() if b.line_rate_factor} == \
        {n: factor for n, (_, factor) in LINE_RATE.items()}


@pytest.mark.parametrize("bench", LINE_RATE)
def test_above_line_rate_times_its_factor_is_wrong(bench):
    """A real two-node output judged against a NIC half a factor too slow for its best figure fails; against one
    half a factor faster, it does not (on the line rate)."""
    path, factor = LINE_RATE[bench]
    s = parse_tables((TOP / "tests" / "data" / path).read_text())[0]
    best = max(r["bandwidth_MBps"] for r in s.rows)
    v = judge([s], INTER, None, "bandwidth_MBps", line_rate_MBps=best / (factor + 0.5))
    assert v.verdict == "fail" and "above the physical limit" in v.points[-1].reason + v.reason
    v = judge([s], INTER, None, "bandwidth_MBps", line_rate_MBps=best / (factor - 0.5))
    assert not any("physical limit" in (p.reason or "") for p in v.points)
