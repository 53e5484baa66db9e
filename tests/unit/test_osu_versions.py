"""OSU micro-benchmarks 5.3 to 7.5 as each release prints them (issue 25): the default sweep of every
generation, from the releases' own sources (docs/osu-versions.md), and the benchmarks read since: latency_mt,
latency_mp, init, hello, the non-blocking collectives, the xccl ones. Real outputs of OSU 5.3.2, 5.7, 6.0, 6.2,
7.2 and 7.5-1 built here are in tests/data/corpus/osu{5,6,7} (index.d/osu.yaml): every one gives its indexed
result through `commstack parse`."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from commstack import benchmarks
from commstack.cli.main import main as cli_main
from commstack.errors import TruncatedError, UnknownFormatError
from commstack.paths import TOP
from commstack.results.parse import parse_output, parse_outputs
from commstack.tools import osu, osu_format

CORPUS = TOP / "tests" / "data" / "corpus"
OSU_INDEX = yaml.safe_load((CORPUS / "index.d" / "osu.yaml").read_text())


def text(name: str) -> str:
    return (CORPUS / name).read_text()


def parse(args: list[str]) -> tuple[int, list | dict | None, str]:
    """`commstack parse ... --json` in process: exit status, the JSON, stderr."""
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(["parse", *args, "--json"])
    return rc, (json.loads(out.getvalue()) if out.getvalue().strip() else None), err.getvalue()


@pytest.mark.parametrize("version, generation", [
    ("5.3", "5.3"), ("5.3.2", "5.3"), ("5.4.1", "5.4"), ("5.7", "5.4"), ("5.9", "5.4"), ("6.2", "5.4"),
    ("7.0", "5.4"), ("7.0-lrbison2", "5.4"), ("7.1", "7.1"), ("7.4", "7.1"), ("7.5", "7.5"), ("7.5.1", "7.5"),
    (None, ""), ("5.2", "5.2"), ("7.6", "7.6"), ("8.0", "8.0")])
def test_each_version_belongs_to_the_generation_its_source_has(version, generation):
    assert osu.family(version) == generation


def test_the_defaults_of_each_generation_as_the_sources_loop():
    """pt2pt latency from 0 B until 7.0 (PT2PT: min_message_size = 0), from 1 B after (0 B holds no element);
    5.3.x one-sided latency from 0 B (its own loops); reductions from one float until 7.0; 7.5 drops -M."""
    get = benchmarks.get
    assert [get("osu_latency").defaults(v) for v in ("5.3.2", "6.2", "7.0", "7.1", "7.5")] == \
        [(0, 4194304)] * 3 + [(1, 4194304)] * 2
    assert [get("osu_put_latency").defaults(v) for v in ("5.3.2", "5.4.1", "7.5")] == \
        [(0, 4194304)] + [(1, 4194304)] * 2
    assert [get("osu_bw").defaults(v) for v in ("5.3", "6.0", "6.1", "6.2", "7.3")] == [(1, 4194304)] * 5
    assert [get("osu_allreduce").defaults(v) for v in ("6.2", "7.0", "7.2")] == [(4, 1048576)] * 2 + [(1, 1048576)]
    assert [get("osu_cas_latency").defaults(v) for v in ("6.2", "7.1")] == [(8, 8), (1, 1)]
    assert get("osu_iallreduce").defaults("5.5") == (4, 1048576) and get("osu_ibarrier").defaults("7.5") is None
    assert get("osu_bw").defaults("8.0") is None and get("osu_bw").defaults(None) is None


def test_a_benchmark_without_sizes_has_no_sizes_to_check():
    """barrier's one row is complete in any version, one whose sized sweeps are not known here too; a sized
    benchmark of that version asks for its size arguments."""
    barrier = text("osu7/osu_barrier-7.5.1.out").replace("v7.5", "v8.0")
    assert parse_output("osu_barrier", barrier, []).sizes == [0]
    with pytest.raises(UnknownFormatError, match="osu_bw v8.0: its default sizes are not known here"):
        parse_output("osu_bw", text("osu7/osu_bw-7.5.1.out").replace("v7.5", "v8.0"), [])


def test_no_column_name_and_a_space_begin_another():
    """header_columns takes the first known name that a space or the line's end follows: with a name that
    began another (`latency` beside `latency (us)`) the order of OSU_COLUMNS would decide what a header means."""
    names = list(osu_format.OSU_COLUMNS)
    assert [(a, b) for a in names for b in names if b.startswith(a + " ")] == []
    assert osu_format.header_columns("# Size      Bandwidth (MB/s) P50 Tail BW(MB/s)") == \
        ["size", "bandwidth_MBps", "p50_tail_bandwidth_MBps"]


def checked(result: dict) -> str:
    """Whether OSU checked the data, from its Validation column, where `parse --json` does not say it (before
    the shared result's `validated`, helper corpus's, is merged)."""
    marks = {r["validation"] for r in result["rows"] if "validation" in r}
    return "failed" if "Fail" in marks else "yes" if marks else "no"


@pytest.mark.parametrize("name", sorted(OSU_INDEX))
def test_every_recorded_osu_output_gives_its_indexed_result(name):
    """Each file through `commstack parse FILE --args ... --ranks N --json`: its benchmark, verdict, whether
    OSU checked the data, and its row count, as indexed."""
    entry = OSU_INDEX[name]
    rc, doc, err = parse([str(CORPUS / name), f"--args={entry['args']}", "--ranks", str(entry["ranks"])])
    want = [(t["benchmark"], t["verdict"], t["validated"], t["rows"]) for t in entry["tables"]]
    if doc is None:  # one error for the whole file: its kind is the verdict
        assert rc and len(want) == 1 and err.split(": ")[2] == want[0][1], err
        return
    got = [(r["benchmark"], r.get("verdict", "complete"), r.get("validated", checked(r)), len(r["rows"]))
           for r in (doc if isinstance(doc, list) else [doc])]
    assert got == want and (rc == 0) == all(t[1] == "complete" for t in want)


@pytest.mark.parametrize("name, summary", [
    ("osu6/osu_bw-6.2.out", "osu_bw (OSU MPI Bandwidth Test v6.2): 23 rows, 1..4194304 B, complete"),
    ("osu5/osu_latency_mp-5.7.out",
     "osu_latency_mp (OSU MPI Multi-process Latency Test v5.7): 24 rows, 0..4194304 B, complete"),
    ("osu7/osu_ibarrier-7.5.1.out",
     "osu_ibarrier (OSU MPI Non-blocking Barrier Latency Test v7.5): 1 rows, 0..0 B, complete"),
])
def test_bin_commstack_parse_reads_them(name, summary):
    """The command users type: a 6.2 sweep without -m (issue 25's first OSU failure), a benchmark whose lines
    come before its title, one without a size column."""
    p = subprocess.run([str(TOP / "bin" / "commstack"), "parse", str(CORPUS / name)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and summary in p.stdout, p.stderr


def test_a_non_blocking_collective_has_its_own_columns():
    full = parse_output("osu_iallreduce", text("osu7/osu_iallreduce-7.5.1-f-c.out"), ["-f", "-c"])
    assert full.columns == ["size", "overall_us", "compute_us", "coll_init_us", "mpi_test_us", "mpi_wait_us",
                            "pure_comm_us", "min_comm_us", "max_comm_us", "overlap_pct", "validation"]
    assert full.sizes[0] == 4 and full.meta["datatype"] == "MPI_INT"  # 7.5: reductions in MPI_INT
    assert (full.row(4)["overall_us"], full.row(4)["overlap_pct"], full.row(4)["validation"]) == (1.60, 27.40, "Pass")
    bar = parse_output("osu_ibarrier", text("osu5/osu_ibarrier-5.7.out"), [])  # a header without `#`
    assert bar.columns == ["size", "overall_us", "compute_us", "pure_comm_us", "overlap_pct"]
    assert bar.rows == [{"size": 0, "overall_us": 2.21, "compute_us": 1.56, "pure_comm_us": 1.30,
                         "overlap_pct": 50.20}]
    assert benchmarks.COLUMNS["overall_us"].unit == "us" and benchmarks.METRICS["overlap_pct"].higher_is_better


def test_the_lines_before_a_title_belong_to_its_table():
    mt = parse_output("osu_latency_mt", text("osu6/osu_latency_mt-6.2.out"), [])
    mp5 = parse_output("osu_latency_mp", text("osu5/osu_latency_mp-5.7.out"), [])  # 5.7: after its title
    mp7 = parse_output("osu_latency_mp", text("osu7/osu_latency_mp-7.5.1.out"), [])
    assert mt.meta == {"sender_threads": 1, "receiver_threads": 2} and mt.sizes[0] == 0
    assert mp5.meta == {"sender_processes": 2, "receiver_processes": 2} and mp5.sizes[0] == 0
    assert mp7.meta == {"sender_processes": 2, "receiver_processes": 2, "datatype": "MPI_CHAR"} and mp7.sizes[0] == 1
    # such a line with no title after it is no table's
    cut = text("osu6/osu_latency_mt-6.2.out").split("# OSU")[0]
    with pytest.raises(TruncatedError, match="ends before the OSU title these lines announce") as info:
        parse_outputs(text("osu6/osu_bw-6.2.out") + cut, [])
    assert (info.value.lineno, info.value.line) == (27, "# Number of Receiver threads: 2")  # the last line


def test_startup_benchmarks_print_one_line():
    init = parse_output("osu_init", text("osu6/osu_init-6.2.out"), [])
    hello = parse_output("osu_hello", text("osu7/osu_hello-7.5.1.out"), [])
    assert init.rows == [{"size": 0, "processes": 2, "init_min_ms": 239, "init_max_ms": 240, "init_avg_ms": 239}]
    assert hello.rows == [{"size": 0, "processes": 2}]
    with pytest.raises(UnknownFormatError, match="osu_init prints one line, no table"):
        parse_outputs("# OSU MPI Init Test v7.5\n# Avg Latency(us)\n  1.00\n", [])
    with pytest.raises(UnknownFormatError, match="osu_init prints one line after its title, not this"):
        parse_outputs("# OSU MPI Init Test v7.5\nnprocs: 2, min: 1 ms, max: 2 ms, avg: 1 ms\n"
                      "nprocs: 2, min: 1 ms, max: 2 ms, avg: 1 ms\n", [])


def test_xccl_outputs_with_and_without_a_title():
    lat = parse_output(None, text("osu7/osu_xccl_latency-7.5-nccl-no-title-repro.out"), [])
    assert (lat.benchmark, lat.version, lat.device, lat.meta) == (
        "osu_xccl_latency", None, "CUDA", {"xccl": "NCCL", "buffers": "D,D"})
    coll = parse_output(None, text("osu7/osu_xccl_allreduce-7.5-nccl-repro.out"), [])
    old = parse_output(None, text("osu6/osu_nccl_allreduce-6.2-repro.out"), [])
    assert (coll.benchmark, coll.sizes[0], old.benchmark, old.sizes[0]) == (
        "osu_xccl_allreduce", 4, "osu_nccl_allreduce", 4)
    # 7.3 moved c/nccl's osu_nccl_* to c/xccl's osu_xccl_*, with the same titles
    names = [parse_output(None, text("osu6/osu_nccl_allreduce-6.2-repro.out").replace("v6.2", v), []).benchmark
             for v in ("v7.2", "v7.3", "v7.3.1")]
    assert names == ["osu_nccl_allreduce", "osu_xccl_allreduce", "osu_xccl_allreduce"]
    bw = text("osu7/osu_xccl_latency-7.5-nccl-no-title-repro.out").replace("Latency (us)", "Bandwidth (MB/s)")
    with pytest.raises(UnknownFormatError, match="osu_xccl_bw and osu_xccl_bibw print the same"):
        parse_outputs(bw, [])


def test_strict_where_the_versions_differ():
    """A 5.4+ one-sided sweep from 0 B is another program's output; 7.0 latency from 0 B is complete, 7.1's
    is not; 6.2's mem-limit warning (no size) is known, glued to the next line as OSU prints it."""
    put = text("osu5/osu_put_latency-5.3.2.out")
    assert parse_output("osu_put_latency", put, []).sizes[0] == 0
    with pytest.raises(UnknownFormatError, match="starts at 0 B, below the 1 B"):
        parse_output("osu_put_latency", put.replace("v5.3.2", "v5.4.1"), [])
    lat = text("osu6/osu_latency-6.2.out")
    assert parse_output("osu_latency", lat.replace("v6.2", "v7.0"), []).sizes[0] == 0
    with pytest.raises(UnknownFormatError, match="starts at 0 B, below the 1 B"):
        parse_output("osu_latency", lat.replace("v6.2", "v7.1"), [])
    warned = text("osu6/osu_alltoall-6.2.out").replace(
        "\n# OSU", "\nWarning! Limiting max message size. Increase -M, --mem-limit for higher message sizes.# OSU", 1)
    assert [n.line for n in parse_output("osu_alltoall", warned, []).notes] == [
        "Warning! Limiting max message size. Increase -M, --mem-limit for higher message sizes."]
    # 1024 ranks: 5.3 - 7.4 stop a gathering collective at 512 MiB / 1024 = 512 KiB, 7.5 has no limit
    assert parse_output("osu_ialltoall", text("osu7/osu_ialltoall-7.5.1.out"), [], ranks=1024).sizes[-1] == 1048576
    with pytest.raises(UnknownFormatError, match="goes on to 1048576 B, past the 1..524288 B"):
        parse_output("osu_ialltoall", text("osu7/osu_ialltoall-7.2.out"), [], ranks=1024)
    glued = text("osu6/osu_mbw_mr-6.2.out").replace("MB/s        Messages/s", "MB/sMessages/s")  # names told apart
    with pytest.raises(UnknownFormatError, match="unknown OSU header line or column"):
        parse_outputs(glued, [])
    unknown = text("osu6/osu_bw-6.2.out") + "# OSU MPI Frobnicate Latency Test v6.2\n"  # a second, unknown title
    with pytest.raises(UnknownFormatError, match="unknown OSU benchmark title") as info:
        osu.parse_osu(unknown)  # the tool's own parser (parse_outputs finds it first, at the title)
    assert (info.value.lineno, info.value.line) == (26, "# OSU MPI Frobnicate Latency Test v6.2")
    nbc = text("osu6/osu_iallreduce-6.2.out")  # a blocking allreduce's row among them: two benchmarks mixed
    with pytest.raises(UnknownFormatError, match="row has 2 fields, the header 5"):
        parse_outputs(nbc.replace("\n16 ", "\n16                      0.43\n16 ", 1), [])


@pytest.mark.parametrize("bench", ["osu_put_latency", "osu_get_latency", "osu_acc_latency", "osu_get_acc_latency"])
def test_one_sided_latencies_of_53_start_at_0_bytes(bench):
    """OSU 5.3's one-sided latency tests run from 0 B by default, 5.4's from 1 B: the real 5.3.2 osu_put_latency
    table under each one-sided latency test's title is whole as 5.3.2, another program's as 5.4.1."""
    title = benchmarks.get(bench).titles[0]
    out = text("osu5/osu_put_latency-5.3.2.out").replace("OSU MPI_Put Latency Test", title)
    sweep = parse_output(None, out, [])
    assert (sweep.benchmark, sweep.sizes[0], sweep.sizes[-1]) == (bench, 0, 4194304)
    with pytest.raises(UnknownFormatError):
        parse_output(None, out.replace("v5.3.2", "v5.4.1"), [])


@pytest.mark.parametrize("bench, whole", [("osu_allreduce", True), ("osu_reduce", True), ("osu_reduce_scatter", True),
                                          ("osu_bcast", False), ("osu_allgather", False)])
def test_53_reductions_start_at_one_float(bench, whole):
    """OSU 5.x reductions count floats: their default sweep starts at 4 B, the other collectives' at 1 B. The real
    5.3.2 osu_allreduce table (4 B up) under each title: whole for a reduction, its first rows missing else."""
    out = text("osu5/osu_allreduce-5.3.2.out").replace("OSU MPI Allreduce Latency Test",
                                                         benchmarks.get(bench).titles[0])
    if whole:
        assert parse_output(None, out, []).sizes[0] == 4
    else:
        with pytest.raises(TruncatedError, match="the sweep starts at 4 B; 1 B comes first"):
            parse_output(None, out, [])
