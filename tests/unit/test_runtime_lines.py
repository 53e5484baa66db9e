"""Job logs of issue 47 through `bin/commstack parse` (tests/data/corpus/index.d/runtime.yaml): the runtime
diagnostics of NCCL, Intel MPI and UCX between the rows of a table, a prefix on every line, module listings, an
orchestrator's lines around nccl-tests, an OSU table whose title was cut. Each is read with the rows of the same
output without them, every diagnostic a note with its line number and source; a row cut in two by one is
refused, quoting it; and no known runtime line between the rows of a bad corpus output turns it into a pass."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commstack import benchmarks
from commstack.errors import UnknownFormatError
from commstack.tools import noise
from commstack.tools.lines import TITLE_MISSING, Quoted, Sweep
from commstack.results.parse import parse_arguments, parse_results, validated
from commstack.tools import osu
from commstack.tools.osu_format import header_benchmarks, header_columns, untitled_benchmark

from test_corpus import CORPUS, INDEX
from test_joblogs import BAD, EXIT, parse, tables

ROW = re.compile(r"\s*\d+\s+\d")  # an OSU or nccl-tests row


def rows(name: str, *extra: str) -> list[dict]:
    [table], p = tables(name, *extra)
    assert table["verdict"] == "complete", p.stderr
    return table["rows"]


def notes(table: dict) -> dict[int, tuple[str, str]]:
    return {n["lineno"]: (n["source"], n["line"]) for n in table["notes"]}


def lines_of(name: str) -> list[str]:
    return (CORPUS / name).read_text().splitlines()


def between_rows(name: str) -> list[int]:
    """The line numbers of the lines between a table's first and last row that are no row."""
    lines = lines_of(name)
    data = [i for i, line in enumerate(lines, 1) if ROW.match(noise.strip_prefix(line)[0])]
    return [i for i in range(data[0], data[-1]) if i not in data and lines[i - 1].strip()]


# ------------------------------------------------------------------ 1. runtime diagnostics between the rows

def test_nccl_debug_lines_between_the_rows_are_notes():
    """NCCL's WARN (its timestamp, file, and the newline before it), lazy connection INFO lines, aws-ofi-nccl's
    NET/OFI line, a CALL and a TRACE line among the rows of 16 ranks: the rows of the run without them."""
    name = "nccl-tests/all_reduce_perf-16ranks-nccl-debug-between-rows.out"
    [table], p = tables(name)
    assert (table["verdict"], table["validated"]) == ("complete", "yes"), p.stderr
    assert table["rows"] == rows("nccl-tests/all_reduce_perf-nccl-info-init-complete.out")
    lines, got = lines_of(name), notes(table)
    inside = between_rows(name)
    assert len(inside) == 6 and all(got[i] == ("nccl", lines[i - 1]) for i in inside)
    warn = next(i for i, line in enumerate(lines, 1) if " NCCL WARN " in line)
    assert got[warn][0] == "nccl" and lines[warn - 2] == "" and lines[warn - 1].startswith("[2025-06-12 09:14:01] ")
    assert {w for line in lines for w in ("NCCL CALL", "NCCL TRACE", "NET/OFI") if w in line} == \
        {"NCCL CALL", "NCCL TRACE", "NET/OFI"}


def test_intel_mpi_debug_lines_with_rank_pid_and_host_around_and_inside_an_osu_table():
    name = "osu5/osu_alltoall-5.6.3-impi2019-debug-plus-inside.out"
    [table], p = tables(name)
    assert table["rows"] == rows("osu5/osu_alltoall-5.6.3-impi2019-debug.out"), p.stderr
    lines, got = lines_of(name), notes(table)
    debug = [i for i, line in enumerate(lines, 1) if "MPI" in line and line.startswith("[")]
    assert len(debug) == 16 and all(got[i][0] == "intel-mpi" for i in debug)
    assert [lines[i - 1][:17] for i in between_rows(name)] == ["[1#5302@ip-10-0-1"] * 3


@pytest.mark.parametrize("name,benchmark", [("osu7/osu_bw-7.2-ucx-proto-info-inside.out", "osu_bw"),
                                            ("osu7/osu_bibw-7.2-ucx-info-tag-output.out", "osu_bibw")])
def test_ucx_protocol_tables_between_the_rows_recorded_here_are_notes(name, benchmark):
    """UCX_LOG_LEVEL=info and UCX_PROTO_INFO=y under Open MPI's UCX pml (record-runtime.sh): the log lines and
    the protocol tables before the title, and those printed when a size first takes a protocol, between rows."""
    [table], p = tables(name)
    assert (table["benchmark"], table["verdict"], len(table["rows"])) == (benchmark, "complete", 21), p.stderr
    assert [r["size"] for r in table["rows"]] == [1 << k for k in range(21)]
    got, inside = notes(table), between_rows(name)
    assert len(inside) >= 7 and all(got[i][0] == "ucx" for i in inside)
    assert any("ep_cfg[" in got[i][1] for i in inside)  # the endpoint configuration's name in the table's head
    assert {s for s, _ in got.values()} == {"ucx"}


# the shapes the libraries' own code and documents give (each named in results/noise.py), not lines of the corpus
FORMATS = [
    # NCCL src/debug.cc: INFO; WARN with file:line (func), the default `[%F %T] ` stamp of 2.23+; CALL; TRACE
    ("nccl", "gpu-07:41263:41263 [3] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.13.2-aws"),
    ("nccl", "[2025-06-12 09:14:01] gpu-07:41263:41311 [3] misc/socket.cc:50 (ncclSocketConnect) NCCL WARN Net : "
             "Connection closed by remote peer"),
    ("nccl", "gpu-07:41263:41263 [3] transport/net.cc:1034 NCCL WARN NET/Plugin: No plugin found"),
    ("nccl", "gpu-07:41263:41263 NCCL CALL ncclAllReduce(0x7f, 0x7f, 8, 7, 0, 0x55, 0x55)"),
    ("nccl", "gpu-07:41263:41290 [3] 1021.402893 ncclProxyProgress:1240 NCCL TRACE progress opCount 12"),
    # Intel MPI Developer Reference, I_MPI_DEBUG: `[rank] `, `[rank#pid@host] ` with a `+` before the level
    ("intel-mpi", "[0#3520@clusternode1] MPI startup(): Multi-threaded optimized library"),
    ("intel-mpi", "[12] MPI startup(): threading: mode: direct"),
    # UCX ucs/debug/log.c: a log line (1.15+'s used transports: `<context> self cfg#0 ...`), a compact line
    ("ucx", "[1738722441.247410] [node1:41263:0]     ucp_worker.c:1855 UCX  INFO  0x55f9c3a1e2c0 self cfg#0 "
            "tag(ud_verbs/ibp3s0:1)"),
    ("ucx", "[1738722441.247410] [node1:41263:0]   |                 0..2038 | eager short | rc_mlx5/mlx5_0:1 |"),
    # Lmod's MT.lua `%3d)` entries in columns, its legend; EasyBuild's `== `; EESSI's init script
    ("lmod", "  9) hwloc/2.9.2-GCCcore-13.2.0    10) libfabric/1.19.0-GCCcore-13.2.0 (g)  11) PMIx/4.2.6"),
    ("lmod", "Currently Loaded Modules Matching: gcc"),
    ("easybuild", "== Temporary log file(s) /tmp/eb-1a2b3c/easybuild-4d5e6f.log* have been removed."),
    ("eessi", "Found EESSI repo @ /cvmfs/software.eessi.io/versions/2023.06!"),
]


@pytest.mark.parametrize("source,line", FORMATS)
def test_the_libraries_formats_are_known_lines(source, line):
    assert noise.classify(line).source == source


@pytest.mark.parametrize("line", [
    "[1738722441.247410] [node1:41263:0]     ucp_worker.c:1855 UCX  ERROR ep_cfg[0]: no transports",  # a crash line
    "[1738722441.247410] [node1:41263:0]   ucp_worker.c:1855 UCX  ERROR ep_cfg[0]: no transports",
    "1024                 12345.67",  # a row
    "  9) 1024   12.50",
])
def test_a_crash_line_or_a_row_is_no_runtime_line(line):
    assert noise.classify(line) is None


# ------------------------------------------------------------------ 2. a prefix on every line

@pytest.mark.parametrize("name,plain", [
    ("osu5/osu_allreduce-5.6.3-srun-label-12-tasks.out", "osu5/osu_allreduce-5.6.3-ompi4-openib-help-boxes.out"),
    ("nccl-tests/all_gather_perf-2.17.1-skypilot-wrapper.out", "nccl-tests/all_gather_perf-2.17.1-h100.out"),
    ("nccl-tests/alltoall_perf-2.17.1-kubectl-timestamps.out", "nccl-tests/alltoall_perf-2.17.1-h100.out"),
])
def test_a_prefix_on_every_line_is_taken_off(name, plain):
    """srun --label's ` 0: ` (12 tasks: two wide), SkyPilot's node prefix, kubectl's RFC 3339 times: the rows and
    the notes (a help box, ssh's warning) of the output without them."""
    [table], p = tables(name)
    [bare], _ = tables(plain)
    assert (table["verdict"], table["validated"], table["rows"]) == ("complete", bare["validated"], bare["rows"])
    known = {(n["source"], n["line"]) for n in bare["notes"]}
    assert known <= {(n["source"], n["line"]) for n in table["notes"]}, p.stderr


def test_tag_output_is_taken_off_every_line_of_both_ranks():
    name = "osu7/osu_bibw-7.2-ucx-info-tag-output.out"
    lines = lines_of(name)
    assert all(re.match(r"\[1,[01]\]<stdout>:", line) for line in lines)
    [table], _ = tables(name)
    assert all(not n["line"].startswith("[1,") for n in table["notes"])


# ------------------------------------------------------------------ 3. module system output in the preamble

def test_lmod_module_lists_and_eessi_banner_before_the_tables():
    """EESSI's blog post: the init script's banner, Lmod's list one entry a line (` 10) libfabric/...`, `(g)`)
    with its legend, and in two columns: notes of lmod and eessi, both tables read."""
    name = "osu7/osu_bibw-osu_latency-7.5-eessi-lmod-list.out"
    got, p = tables(name)
    assert [(t["benchmark"], t["verdict"], len(t["rows"])) for t in got] == \
        [("osu_bibw", "complete", 23), ("osu_latency", "complete", 23)], p.stderr
    lines, first = lines_of(name), notes(got[0])
    listed = [i for i, line in enumerate(lines, 1) if re.match(r" *\d+\) ", line)]
    assert len(listed) == 19 and all(first[i] == ("lmod", lines[i - 1]) for i in listed)
    assert first[listed[9]][1] == " 10) libfabric/1.19.0-GCCcore-13.2.0"
    assert first[1] == ("eessi", "Environment set up to use EESSI (2023.06), have fun!")
    assert [first[i][0] for i in range(listed[0] - 1, listed[-1] + 4) if i in first] == ["lmod"] * 22
    columns, _ = tables("osu7/osu_bibw-osu_latency-7.5-cray-lmod-columns.out")
    assert {n["source"] for n in columns[0]["notes"] if ") " in n["line"]} == {"lmod"}


def test_easybuild_messages_are_known():
    assert noise.classify("== COMPLETED: Installation ended successfully (took 5 min 3 secs)").source == "easybuild"


# ------------------------------------------------------------------ 4. an orchestrator's lines around nccl-tests

def test_an_orchestrators_lines_around_nccl_tests_are_the_job_logs():
    name = "nccl-tests/all_gather_perf-2.17.1-skypilot-wrapper.out"
    [table], p = tables(name)
    assert (table["verdict"], len(table["rows"])) == ("complete", 25), p.stderr
    lines, whats = lines_of(name), {n["lineno"]: n["what"] for n in table["notes"]}
    assert all(whats[i].endswith("before the first table") for i in range(1, 11))
    assert whats[len(lines)].endswith("after the last table") and lines[-1].startswith("2025-03-04 10:14:05,002")
    p = parse(str(CORPUS / name), "--args=-b 8 -e 128M -f 2 -g 1", "--strict")
    assert p.returncode == EXIT["unknown-format"] and lines[0] in p.stderr  # a step's own output: strict


# ------------------------------------------------------------------ 5. an OSU table whose title was cut

def test_a_cut_title_where_one_benchmark_prints_the_header():
    name = "osu7/osu_mbw_mr-7.2-title-cut.out"
    [table], p = tables(name)
    assert (table["benchmark"], table["verdict"], table["validated"], table["version"]) == \
        ("osu_mbw_mr", "complete", "no", None) and p.returncode == 0, p.stderr
    assert table["rows"] == rows("osu7/osu_mbw_mr-7.2-joblog-counters.out")
    [cut] = [n for n in table["notes"] if n["source"] == "osu"]
    assert cut["what"].startswith("no title before the header") and cut["line"].startswith("# Size")
    assert "osu_mbw_mr (no title): 17 rows" in parse(str(CORPUS / name), "--args=-m 1:65536").stdout
    p = parse(str(CORPUS / name), "--args=-m 1:65536", "--strict")  # a step's own output: no title, refused
    assert p.returncode == EXIT["unknown-format"] and "no benchmark title" in p.stderr


def test_a_cut_title_where_several_benchmarks_print_the_header_names_them(tmp_path):
    [table], p = tables("osu7/osu_bw-7.2-title-cut.out")
    assert (table["benchmark"], table["verdict"], table["rows"]) == (None, "unknown-format", [])
    assert table["error"]["line"] == "# Size      Bandwidth (MB/s)"
    assert re.search(r"osu_bw, osu_bibw, .*osu_xccl_bw.* print the same", table["error"]["message"])
    assert p.returncode == EXIT["unknown-format"]
    # a one-sided table's window lines narrow it to those; osu_barrier's header has no size
    log = tmp_path / "job.log"
    log.write_text("# Window creation: MPI_Win_allocate\n# Synchronization: MPI_Win_flush\n"
                   "# Size      Bandwidth (MB/s)\n1                       1.00\n")
    p = parse(str(log), "--args=-m 1:1")
    assert "osu_put_bw, osu_get_bw and osu_put_bibw print the same" in p.stderr
    log.write_text("Loading mpi/hpcx\n\n# Avg Latency(us)\n        1.39\n")
    [barrier] = json.loads(parse(str(log), "--json").stdout)
    assert (barrier["benchmark"], barrier["verdict"], barrier["validated"]) == ("osu_barrier", "complete", "no")


# ------------------------------------------------------------------ a row cut in two is still refused

SPLICED = [p.example for p in noise.PATTERNS if p.source in ("nccl", "ucx", "intel-mpi")] + [
    "[1700000000.123456] [node1:12345:0]   | 0x55f9c3a1e2c0 inter-node cfg#2 | tagged message by ucp_tag_send* |"]


@pytest.mark.parametrize("glued", [True, False], ids=["glued to its first half", "on a line of its own"])
@pytest.mark.parametrize("name,args", [("osu7/osu_latency-7.2-joblog-lmod-time.out", "-m 1:4096"),
                                       ("nccl-tests/all_gather_perf-2.17.1-h100.out", "-b 8 -e 128M -f 2 -g 1")])
@pytest.mark.parametrize("diagnostic", SPLICED)
def test_a_row_cut_in_two_by_a_runtime_line_is_refused_quoting_it(tmp_path, name, args, diagnostic, glued):
    """A diagnostic printed between the two halves of a row (its stream unbuffered, the row's not): a half of the
    row is quoted (the first, with the diagnostic glued to it; alone, whichever no row can be: `32  46` may be one,
    `.11` not)."""
    lines = lines_of(name)
    i = [k for k, line in enumerate(lines) if ROW.match(line)][5]
    cut = re.match(r"\s*\d+\s+", lines[i]).end() + 2  # inside the first figure
    head, tail = lines[i][:cut], lines[i][cut:]
    spliced = [head + diagnostic, tail] if glued else [head, diagnostic, tail]
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines[:i] + spliced + lines[i + 1:]) + "\n")
    p = parse(str(log), f"--args={args}", "--json")
    [table] = json.loads(p.stdout)
    assert table["verdict"] in ("unknown-format", "bad-number") and p.returncode != 0
    quoted = {i + 1 + k: line.rstrip() for k, line in enumerate(spliced) if line != diagnostic}
    assert quoted[table["error"]["lineno"]] == table["error"]["line"]
    assert not glued or table["error"]["lineno"] == i + 1


# ------------------------------------------------------------------ no runtime line turns a bad output into a pass

KNOWN = [p.example for p in noise.PATTERNS]


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
@pytest.mark.parametrize("name", BAD)
def test_no_runtime_line_before_after_or_between_the_rows_turns_a_bad_output_into_a_pass(name, data):
    """Known runtime lines (every pattern's example) anywhere between the whole lines of every bad corpus output,
    read as a job log: some table still fails, and none that failed is read as validated."""
    entry = INDEX[name]
    text = (CORPUS / name).read_bytes().decode(errors="replace")
    lines = text.splitlines(keepends=True)
    where = st.integers(0, len(lines) - (0 if text.endswith("\n") else 1))  # never after a cut last line
    for _ in range(data.draw(st.integers(1, 4))):
        lines.insert(data.draw(where), data.draw(st.sampled_from(KNOWN)) + "\n")
    results = parse_results("".join(lines), parse_arguments(entry.args, entry.ranks), entry.ranks, lenient=True)
    assert any(r.error for r in results), f"{name} passes with {lines}"
    if all(t.validated != "yes" for t in entry.tables):
        assert all(r.validated != "yes" for r in results), f"{name} validated"


# ------------------------------------------------------------------ in process: what a header without a title leaves

HEADERS = {"bw": "# Size      Bandwidth (MB/s)", "mbw": "# Size                  MB/s        Messages/s",
           "lat": "# Size          Latency (us)", "avg": "# Avg Latency(us)",
           "nbc": "# Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)",
           "nbc sized": "# Size           Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)"}
WINDOW = {"window_creation": "MPI_Win_allocate", "synchronization": "MPI_Win_flush"}


@pytest.mark.parametrize("header,meta,named", [
    ("bw", {}, {"osu_bw", "osu_bibw", "osu_xccl_bw", "osu_xccl_bibw", "osu_nccl_bw", "osu_nccl_bibw"}),
    ("bw", WINDOW, {"osu_put_bw", "osu_get_bw", "osu_put_bibw"}),
    ("bw", {"xccl": "NCCL"}, {"osu_xccl_bw", "osu_xccl_bibw"}),
    ("mbw", {"pairs": 1, "window_size": 64}, {"osu_mbw_mr"}),
    ("mbw", WINDOW, set()),
    ("lat", {"xccl": "NCCL"}, {"osu_xccl_latency"}),
    ("avg", {}, {"osu_barrier"}),
    ("nbc", {}, {"osu_ibarrier"}),
    ("nbc sized", {}, {b.name for b in osu.BENCHMARKS.values() if b.metric == "overall_us" and b.sized}),
])
def test_the_benchmarks_that_print_a_header_without_a_title(header, meta, named):
    assert {b.name for b in header_benchmarks(osu.BENCHMARKS.values(), header_columns(HEADERS[header]), meta)} == named
    lat = {b.name for b in header_benchmarks(osu.BENCHMARKS.values(), ["size", "latency_us"], {})}
    assert {"osu_latency", "osu_allreduce", "osu_nccl_bcast"} <= lat and not lat & {"osu_put_latency", "osu_init"}


def test_an_untitled_header_names_the_benchmarks_it_may_be():
    many = osu.BENCHMARKS.values()
    assert untitled_benchmark(many, "garbage", 3, {}) is None
    assert untitled_benchmark(many, HEADERS["mbw"], 3, {}).name == "osu_mbw_mr"
    with pytest.raises(UnknownFormatError, match=r"^a table without a title: osu_put_bw, osu_get_bw and osu_put_bibw "
                                                 r"print the same; run one") as e:
        untitled_benchmark(many, HEADERS["bw"], 3, WINDOW)
    assert (e.value.lineno, e.value.line) == (3, HEADERS["bw"])
    with pytest.raises(UnknownFormatError, match=r": osu_latency, osu_multi_lat, osu_latency_mt, osu_latency_mp, "
                                                 r"osu_allreduce, osu_alltoall and 25 more print the same"):
        untitled_benchmark(many, HEADERS["lat"], 3, {})
    with pytest.raises(UnknownFormatError, match=r": no OSU benchmark prints the same"):
        untitled_benchmark(many, HEADERS["mbw"], 3, WINDOW)
    with pytest.raises(UnknownFormatError, match=r": osu_bw, osu_bibw, osu_xccl_bw, osu_xccl_bibw, osu_nccl_bw and "
                                                 r"osu_nccl_bibw print the same"):  # six: all named
        untitled_benchmark(many, HEADERS["bw"], 3, {})
    with pytest.raises(UnknownFormatError, match=r": osu_xccl_bw and osu_xccl_bibw print the same"):
        untitled_benchmark(many, HEADERS["bw"], 3, {"xccl": "NCCL"})
    assert untitled_benchmark(many, HEADERS["avg"], 3, {}).name == "osu_barrier"


def test_the_lines_before_an_untitled_header_each_once():
    lines = [Quoted(line, lineno) for lineno, line in enumerate(
        ["Job 1", "# [ pairs: 1 ] [ window size: 64 ]", "# Datatype: MPI_CHAR.", HEADERS["mbw"]], 1)]
    assert osu.untitled(lines, 0) is None and osu.untitled(lines, 1).name == "osu_mbw_mr"
    assert osu.untitled(lines, 2).name == "osu_mbw_mr" and osu.untitled(lines, 3).name == "osu_mbw_mr"
    with pytest.raises(UnknownFormatError, match="no OSU benchmark prints"):  # osu_mbw_mr prints no window lines
        osu.untitled([Quoted("# Window creation: MPI_Win_allocate", 1), Quoted(HEADERS["mbw"], 2)], 0)
    twice = lines[:2] + [Quoted(lines[1].text, 3)] + lines[3:]
    assert osu.untitled(twice, 1) is None and osu.untitled(lines[1:3], 0) is None  # no header after them


MBW_ROWS = "".join(f"{1 << k:<10d}{k + 1.5:>18.2f}{k + 100.25:>18.2f}\n" for k in range(23))  # 1 B to 4 MiB
MBW = "# [ pairs: 1 ] [ window size: 64 ]\n" + HEADERS["mbw"] + "\n" + MBW_ROWS


def test_an_untitled_table_in_process_job_logs_only():
    """Its defaults are those every release shares (osu_mbw_mr: 1 B to 4 MiB); a step's own output reads none; a
    job script's line after it and an error inside it keep what `commstack parse` keeps of a titled one."""
    [r] = parse_results("Loading mpi/hpcx\n" + MBW + "Done.\n", [], lenient=True)
    assert (r.benchmark, r.verdict, r.validated, len(r.sweep.rows), r.sweep.meta[TITLE_MISSING]) == \
        ("osu_mbw_mr", "complete", "no", 23, True)
    assert [n.what for n in r.notes][-1].endswith("after the last table") and r.first == 2
    [cut] = [n for n in r.notes if n.source == "osu"]
    assert (cut.lineno, cut.line) == (3, HEADERS["mbw"]) and cut.what.startswith("no title before the header")
    [strict] = parse_results(MBW, [], lenient=False)
    assert (strict.verdict, strict.error.message[:18]) == ("unknown-format", "no benchmark title")
    broken = MBW.replace("\n32 ", "\n32x ")
    [r] = parse_results(broken, [], lenient=True)
    assert (r.benchmark, r.verdict, len(r.sweep.rows)) == ("osu_mbw_mr", "bad-number", 5)
    [r] = parse_results("# Datatype: MPI_CHAR.\n# OSU MPI Bandwidth Test v7.2\n" + HEADERS["bw"] + "\n1  1.00\n",
                        ["-m", "1:1"], lenient=True)
    assert (r.verdict, r.error.lineno, r.error.message[:18]) == ("unknown-format", 1, "no benchmark title")
    for before in ("", "Job 4242 on node1\n"):  # the job script's line before it is a note: the header is quoted
        [r] = parse_results(before + HEADERS["bw"] + "\n1                       1.00\n", ["-m", "1:1"], lenient=True)
        assert (r.benchmark, r.error.lineno, r.error.line) == (None, 1 + bool(before), HEADERS["bw"])
        assert "osu_bw, osu_bibw" in r.error.message


def test_a_missing_title_leaves_a_benchmarks_check_unvouched_for():
    get = benchmarks.get
    assert get("osu_mbw_mr").defaults(None, title_missing=True) == (1, 4194304)
    assert get("osu_mbw_mr").defaults(None) is None and get("osu_latency").defaults(None, title_missing=True) is None
    passed = Sweep("osu", "osu_barrier", "", None, None, ["size", "latency_us", "validation"],
                   [{"size": 0, "latency_us": 1.0, "validation": "Pass"}])
    assert validated(passed) == "yes"
    passed.meta[TITLE_MISSING] = True
    assert validated(passed) == "no"
    passed.rows[0]["validation"] = "Fail"
    assert validated(passed) == "failed"
