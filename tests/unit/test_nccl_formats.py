"""nccl-tests 2.0-2.19 and rccl-tests as each version prints them (commstack.tools.nccl_tests), detail by
detail; the recorded outputs (tests/data/corpus/{nccl-tests,rccl-tests}, index.d/nccl.yaml) go through
`commstack parse` in test_corpus."""

import pytest

from commstack import benchmarks
from commstack.errors import ParseError
from commstack.paths import TOP
from commstack.results.parse import identify, parse_output, parse_outputs, parse_tables, validated
from commstack.tools import nccl_tests


def run(version: str | None, *, marker: bool, rows: list[str], params: str | None = None, footer: list[str],
        header: list[str] | None = None, devices: list[str] | None = None) -> str:
    lines = [f"# nccl-tests version {version} nccl-headers=22803 nccl-library=22803"] if version else []
    lines += ["# Collective test starting: all_reduce_perf"] if marker else []
    lines += [params or "# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 "
              "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    lines += devices or ["#  Rank  0 Group  0 Pid   1234 on      node1 device  0 [0000:18:00] NVIDIA H100"]
    lines += ["#"] + (header or HEADER) + rows + footer
    return "\n".join(lines) + "\n"


HEADER = ["#                                                              out-of-place                       "
          "in-place          ",
          "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
          "   busbw #wrong",
          "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
          "  (GB/s)       "]


def row(size: int, typ: str = "float", width: int = 4, wrong: str = "0") -> str:
    """A 2.13+ row as util.cu prints it ("%12li  %12li  %8s  %6s  %6s", then each half; %6g wrong counts)."""
    return (f"{size:12d}  {size // width:12d}  {typ:>8s}  {'sum':>6s}  {-1:6d}    20.10    0.00    0.00  {'0':>6s}"
            f"    19.90    0.00    0.00  {wrong:>6s}")


ROWS = [row(8), row(16)]
FOOTER = ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0.001 ", "#"]
ARGS = ["-b", "8", "-e", "16", "-f", "2"]


def test_the_version_line_and_the_trailing_hash_of_2_17_7_on():
    text = run("2.19.4", marker=True, rows=ROWS,
               footer=FOOTER + ["# Collective test concluded: all_reduce_perf", "#", ""])
    [s] = parse_outputs(text, ARGS)
    assert (s.benchmark, s.version, s.complete, validated(s)) == ("all_reduce_perf", "2.19.4", True, "yes")
    assert s.meta["headers"] == s.meta["library"] == 22803 and "avg_busbw_check" not in s.meta


def test_a_version_line_with_its_git_hash():
    end = ["# Collective test concluded: all_reduce_perf", "#"]
    text = run("2.20.0 (b4d5bee)", marker=True, rows=ROWS, footer=FOOTER + end)
    [s] = parse_outputs(text, ARGS)
    assert (s.version, s.meta["commit"]) == ("2.20.0", "b4d5bee")


def test_without_markers_the_footer_ends_the_run_and_no_benchmark_is_named():
    [s] = parse_outputs(run(None, marker=False, rows=ROWS, footer=FOOTER + [""]), ARGS)
    assert (s.benchmark, s.complete, len(s.rows)) == (None, True, 2)


def test_without_markers_a_run_cut_before_the_footer_is_truncated():
    with pytest.raises(ParseError) as e:
        parse_outputs(run(None, marker=False, rows=ROWS, footer=FOOTER[:2]), ARGS)
    assert e.value.kind == "truncated"


def test_text_after_the_end_is_refused_quoted():
    end = ["# Collective test concluded: all_reduce_perf", "#"]
    text = run("2.19.4", marker=True, rows=ROWS, footer=FOOTER + end + ["# error: x", "garbage"])
    with pytest.raises(ParseError) as e:
        parse_outputs(text, ARGS)
    assert (e.value.kind, e.value.line) == ("unknown-format", "garbage")


def test_a_bare_last_error_before_the_next_run_is_kept():
    """2.13.4-2.17.2 print NCCL's last error bare after the end line: in a job of two runs it stands before the
    second run's version line. The tool's parser gives it to the first run; `commstack parse`, which cuts the job
    at titles first, keeps it as a note between the two tables."""
    end = ["# Collective test concluded: all_reduce_perf"]  # no closing `#` before 2.17.7
    first = run("2.15.5", marker=True, rows=ROWS, footer=FOOTER + end + ["unhandled cuda error"])
    second = run("2.15.5", marker=True, rows=ROWS, footer=FOOTER + end)
    one, two = parse_tables(first + second)  # the tool's parser, its title telling which
    assert one.meta["nccl_last_error"] == "unhandled cuda error" and "nccl_last_error" not in two.meta
    one, two = parse_outputs(first + second, ARGS)
    assert [n.line for n in one.notes] == ["unhandled cuda error"] and two.notes == []


def test_ncclgetlasterror_after_the_end_is_kept():
    end = ["# Collective test concluded: all_reduce_perf", "#"]
    text = run("2.19.4", marker=True, rows=ROWS, footer=FOOTER + end + ["# error: remote process exited"])
    [s] = parse_outputs(text, ARGS)
    assert s.meta["nccl_last_error"] == "remote process exited"


@pytest.mark.parametrize("wrong, count", [("96", 96), ("1.04858e+06", 1048580), ("1.67772e+07", 16777200)])
def test_g_notation_wrong_counts_are_counts_and_fail_the_check(wrong, count):
    rows = [row(8), row(16, wrong=wrong)]
    with pytest.raises(ParseError) as e:
        parse_outputs(run(None, marker=True, rows=rows, footer=[
            "# Out of bounds values : 1 FAILED", *FOOTER[1:], "# Collective test concluded: all_reduce_perf"]), ARGS)
    assert e.value.kind == "validation-failed" and e.value.line == rows[1]
    [s] = nccl_tests.parse(run(None, marker=True, rows=rows, footer=FOOTER + [
        "# Collective test concluded: all_reduce_perf"]))
    assert s.rows[1]["ip_wrong"] == count and validated(s) == "failed"


def test_c0_is_complete_not_validated_and_na_needs_validation_0():
    rows = [r[:-6] + "   N/A" for r in ROWS]
    rows = [r.replace("      0    ", "    N/A    ") for r in rows]
    c0 = "# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 " \
         "validation: 0 graph: 0"
    [s] = parse_outputs(run(None, marker=False, params=c0, rows=rows, footer=FOOTER), ARGS)
    assert validated(s) == "no" and [r["oop_wrong"] for r in s.rows] == [None, None]
    with pytest.raises(ParseError) as e:  # N/A where the run says it checks its data
        parse_outputs(run(None, marker=False, rows=rows, footer=FOOTER), ARGS)
    assert e.value.kind == "unknown-format"


def test_the_2_0_era_error_column_is_a_deviation_and_the_footer_the_verdict():
    params = "# nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 "
    devices = ["#   Rank  0 Pid   4000 on    dgx1-01 device  0 [0x06] Tesla V100-SXM2-16GB"]
    header = ["#                                                     out-of-place                       in-place",
              "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw"
              "  error",
              "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]
    rows = ["           8             2   float     sum    28.35    0.00    0.00  1e-06    28.72    0.00    0.00"
            "  0e+00",
            "          16             4   float     sum    29.15    0.00    0.00  2e+00    27.52    0.00    0.00"
            "  0e+00"]
    [s] = parse_outputs(run(None, marker=False, params=params, devices=devices, header=header, rows=rows,
                            footer=FOOTER), ARGS)
    assert [r["oop_error"] for r in s.rows] == [1e-06, 2.0] and validated(s) == "yes" and "oop_wrong" not in s.columns
    failed = run(None, marker=False, params=params, devices=devices, header=header, rows=rows,
                 footer=["# Out of bounds values : 2 FAILED"] + FOOTER[1:])
    with pytest.raises(ParseError) as e:
        parse_outputs(failed, ARGS)
    assert (e.value.kind, e.value.line) == ("validation-failed", "# Out of bounds values : 2 FAILED")


def test_d_all_gives_a_table_per_datatype_and_a_type_coming_back_is_two_runs():
    rows = [row(8), row(16), row(8, "half", 2), row(16, "half", 2)]
    sweeps = parse_outputs(run("2.19.4", marker=True, rows=rows, footer=FOOTER + [
        "# Collective test concluded: all_reduce_perf", "#"]), ARGS)
    assert [(s.meta["type"], s.sizes, [r["count"] for r in s.rows]) for s in sweeps] == [
        ("float", [8, 16], [2, 4]), ("half", [8, 16], [4, 8])]
    with pytest.raises(ParseError) as e:
        parse_outputs(run("2.19.4", marker=True, rows=rows + [row(8)], footer=FOOTER), ARGS)
    assert e.value.kind == "unknown-format" and "two runs" in e.value.message


def test_runs_one_after_another_are_tables_and_interleaved_runs_are_refused():
    """A job's runs one after the other; a build without MPI under mpirun prints one run per rank, interleaved."""
    text = run(None, marker=False, rows=ROWS, footer=FOOTER)
    assert [len(s.rows) for s in parse_outputs(text + text, ARGS)] == [2, 2]
    lines = text.split("\n")
    with pytest.raises(ParseError) as e:
        parse_outputs("\n".join(lines[:1] + lines), ARGS)
    assert (e.value.kind, e.value.lineno) == ("unknown-format", 2) and "second" in e.value.message


@pytest.mark.parametrize("name", ["gather_perf", "scatter_perf", "hypercube_perf", "alltoallv_perf",
                                  "all_reduce_perf_mpi", "sendrecv_perf_mpi"])
def test_every_binary_name_is_known(name):
    assert identify(f"# Collective test starting: {name}\n").name == name
    assert benchmarks.get(name).tool is nccl_tests.TOOL


def test_an_unknown_binary_is_refused_quoted():
    with pytest.raises(ParseError) as e:
        identify("# Collective test starting: all_reduce_bias_perf\n")
    assert (e.value.kind, e.value.line) == ("unknown-format", "# Collective test starting: all_reduce_bias_perf")


def test_a_reductions_rows_then_another_benchmarks_are_refused():
    """all_reduce_perf's rows, then all_gather_perf's (op none) under the same header: two benchmarks."""
    other = [r.replace("     sum  ", "    none  ") for r in ROWS]
    with pytest.raises(ParseError) as e:
        parse_outputs(run("2.19.4", marker=True, rows=ROWS + other, footer=FOOTER), ARGS)
    assert (e.value.kind, e.value.line, e.value.message) == ("unknown-format", other[0], "rows with op none after "
                                                             "rows with op sum: two benchmarks' rows in one table")
    hypercube = [r.replace("     sum  ", "          ") for r in ROWS]
    assert refused(run("2.19.4", marker=True, rows=ROWS + hypercube, footer=FOOTER))[1].startswith(
        "rows with op (none) after rows with op sum")


def test_a_step_names_the_table_of_an_output_that_names_none():
    """The runner knows which binary it ran: an output before 2.16.7 gets the step's benchmark; one that
    names another binary on its second line (2.17.4+, after the version line) is refused."""
    assert parse_output("reduce_scatter_perf", run(None, marker=False, rows=ROWS, footer=FOOTER), ARGS).benchmark \
        == "reduce_scatter_perf"
    text = run("2.19.4", marker=True, rows=ROWS, footer=FOOTER + ["# Collective test concluded: all_reduce_perf", "#"])
    assert parse_output("all_reduce_perf", text, ARGS).version == "2.19.4"
    with pytest.raises(ParseError) as e:
        parse_output("all_gather_perf", text, ARGS)
    assert (e.value.kind, e.value.line) == ("unknown-format", "# Collective test starting: all_reduce_perf")


END = ["# Collective test concluded: all_reduce_perf"]


def refused(text: str) -> tuple[str, str, str]:
    with pytest.raises(ParseError) as e:
        parse_outputs(text, ARGS)
    return e.value.kind, e.value.message, e.value.line


@pytest.mark.parametrize("lines, kind, message, line", [
    # the version line after the start marker; a start marker after the parameter line
    (lambda x: [x[1], x[0]] + x[2:], "unknown-format", "the version line is not the first", "# nccl-tests version"),
    (lambda x: x[:3] + [x[1]] + x[3:], "unknown-format", "a second nccl-tests run", "# Collective test starting"),
    (lambda x: x[:2] + [x[1]] + x[2:], "unknown-format", "a second nccl-tests run", "# Collective test starting"),
    (lambda x: x[:8] + x[10:], "unknown-format", "data row before the nccl-tests column header", ROWS[0]),
    (lambda x: x[:9] + x[10:], "unknown-format", "data row before the nccl-tests column header", ROWS[0]),
    (lambda x: x[:-7] + END + x[-7:], "unknown-format", "the end line before the footer", END[0]),
    (lambda x: x[:-2] + ["# Avg bus bandwidth    : 3 "] + x[-2:], "unknown-format",
     "between the footer and '# Collective test concluded'", "# Avg bus bandwidth    : 3"),
    (lambda x: x[:-1] + ["# x"] + x[-1:], "unknown-format", "between '# Collective test concluded' and its closing",
     "# x"),
    (lambda x: x[:-1], "truncated", "before the benchmark's end line", ROWS[-1]),  # 2.19 without its closing #
])
def test_the_end_of_a_2_19_run_line_by_line(lines, kind, message, line):
    whole = run("2.19.4", marker=True, rows=ROWS, footer=FOOTER + END + ["#"]).rstrip("\n").split("\n")
    got = refused("\n".join(lines(whole)) + "\n")
    assert got[0] == kind and message in got[1] and got[2].startswith(line)


def test_the_closing_hash_is_2_17_7s_and_an_end_line_without_newline_is_cut():
    assert parse_outputs(run("2.17.7", marker=True, rows=ROWS, footer=FOOTER + END + ["#"]), ARGS)[0].complete
    assert refused(run("2.17.6", marker=True, rows=ROWS, footer=FOOTER + END + ["#"]))[:2] == (
        "unknown-format", "output after '# Collective test concluded'")
    assert parse_outputs(run("2.17.6", marker=True, rows=ROWS, footer=FOOTER + END), ARGS)[0].complete
    with pytest.raises(ParseError) as e:
        parse_outputs(run("2.17.6", marker=True, rows=ROWS, footer=FOOTER + END)[:-1], ARGS)
    assert (e.value.kind, e.value.message, e.value.line, e.value.lineno) == (
        "truncated", "the output ends inside its end line (no newline after it)", END[0], 16)


def test_the_optional_lines_of_a_run_are_kept():
    params = ("# nThread 1 nGpus 1 minBytes 64 maxBytes 4294967296 step: 2(factor) warmup iters: 5 iters: 20 "
              "agg iters: 1 validation: 1 graph: 0")
    text = run("2.19.4", marker=True, rows=ROWS, footer=["# Out of bounds values : 0 OK",
                                                         "# Avg bus bandwidth    : 0.001 FAILED", "#"] + END + [
        "# GPU memory usage     : Initialization 512 MB | Total  1.50 GB", "#"], params=params.replace(
        "# nThread", "# nThread"))
    text = text.replace("# Using devices", "#\n# Reducing maxBytes to 16 due to memory limitation\n# Using devices")
    text = text.replace(" minBytes 64 ", " minBytes 8 ")
    [s] = parse_outputs(text, ["-b", "8", "-e", "16"])
    assert (s.meta["maxBytes"], s.meta["maxBytes_asked"], s.meta["minBytes"]) == (16, 4294967296, 8)
    assert s.meta["avg_busbw_check"] == "FAILED" and s.meta["gpu_memory"].startswith("Initialization 512 MB")
    lowered = text.replace(" minBytes 8 ", " minBytes 64 ").replace(ROWS[0] + "\n", "")
    assert nccl_tests.parse(lowered)[0].meta["minBytes"] == 16  # nccl-tests lowers minBytes with maxBytes


def test_rccl_tests_lines():
    text = run(None, marker=False, rows=ROWS, footer=FOOTER)
    plain = parse_outputs(text, ARGS)[0]
    assert (plain.device, "fork" in plain.meta, plain.version) == ("CUDA", False, None)
    rccl = parse_outputs(text.replace("# Using devices", "rccl-tests: Version develop:ae3e635\n# Using devices"),
                         ARGS)[0]
    assert (rccl.device, rccl.meta["fork"], rccl.version) == ("ROCM", "rccl-tests", "develop:ae3e635")
    asterisks = "# Errors with asterisks indicate errors that have exceeded the maximum threshold."
    assert parse_outputs(text.replace("# Out of bounds", asterisks + "\n# Out of bounds"), ARGS)[0].device == "ROCM"
    cycles = text.replace(ROWS[-1], ROWS[-1] + "\n# Testing 2 cycle.\n" + "\n".join(ROWS))
    assert [(s.sizes, s.meta.get("cycle")) for s in parse_outputs(cycles, ARGS)] == [([8, 16], None), ([8, 16], 2)]


def test_every_optional_column():
    """rccl-tests' hipevt and algo/proto/nchannels, 2.19.2's per-iteration columns, 2.17.6's timestamp."""
    header = ["#  out-of-place (+ per-iteration)  in-place (+ per-iteration)",
              "# size count type redop root time hipevt algbw busbw #wrong i_min i_max i_p99 i_cv% cputime algbw busbw "
              "#wrong algo proto nchannels timestamp",
              "# (B) (elements) (us) (us) (GB/s) (GB/s) (us) (us) (us) (%) (us) (GB/s) (GB/s) %Y-%m-%d %H:%M:%S"]
    rows = [f"{size} {size // 4} float sum -1 20.1 N/A 0.00 0.00 0 1.5 2.5 2.4 3.1 19.9 0.00 0.00 0 RING LL 16 "
            "2026-11-24 06:40:01" for size in (8, 16)]
    [s] = parse_outputs(run("2.19.4", marker=True, rows=rows, header=header, footer=FOOTER + END + ["#"]), ARGS)
    assert s.columns == ["size", "count", "type", "redop", "root", "oop_time_us", "oop_hipevt_us", "oop_algbw_GBps",
                         "oop_busbw_GBps", "oop_wrong", "oop_i_min_us", "oop_i_max_us", "oop_i_p99_us", "oop_i_cv_pct",
                         "ip_cputime_us", "ip_algbw_GBps", "ip_busbw_GBps", "ip_wrong", "algo", "proto", "nchannels",
                         "timestamp"]
    assert s.rows[1] == {"size": 16, "count": 4, "type": "float", "redop": "sum", "root": -1, "oop_time_us": 20.1,
                         "oop_hipevt_us": None, "oop_algbw_GBps": 0.0, "oop_busbw_GBps": 0.0, "oop_wrong": 0,
                         "oop_i_min_us": 1.5, "oop_i_max_us": 2.5, "oop_i_p99_us": 2.4, "oop_i_cv_pct": 3.1,
                         "ip_cputime_us": 19.9, "ip_algbw_GBps": 0.0, "ip_busbw_GBps": 0.0, "ip_wrong": 0,
                         "algo": "RING", "proto": "LL", "nchannels": 16, "timestamp": "2026-11-24 06:40:01"}
    inplace = ["#  in-place", "# size count type redop root time algbw busbw #wrong",
               "# (B) (elements) (us) (GB/s) (GB/s)"]
    [s] = parse_outputs(run(None, marker=False, rows=[r[:r.index(" 20.1")] + " 20.1 0.00 0.00 0" for r in rows],
                            header=inplace, footer=FOOTER), ARGS)
    assert s.columns[5:] == ["ip_time_us", "ip_algbw_GBps", "ip_busbw_GBps", "ip_wrong"] and s.sizes == [8, 16]
    assert nccl_tests.COLUMNS["oop_busbw_GBps"].shown == ("bus bandwidth", "GB/s", 1.0)
    assert nccl_tests.COLUMNS["ip_busbw_GBps"].shown is None


@pytest.mark.parametrize("rows, kind, message, quoted", [
    ([row(8), row(32)], "truncated", "row 2 of float sum prints 32 B, above the sweep's size 16 B there", 1),
    ([row(1, "int8", 1), row(1, "int8", 1)], "unknown-format", "message sizes do not increase", 1),
    ([row(8), row(8, "half", 2), row(16, "half", 2)], "unknown-format", "1 rows of float sum; the sweep of 8..16 B",
     0),
    ([row(8), row(16), row(32)], "unknown-format", "3 rows of float sum; the sweep of 8..16 B has 2 sizes", 2),
    ([row(8).replace("float", "FLOAT")], "unknown-format", "type 'FLOAT' is not an nccl-tests type", 0),
    ([row(8, wrong="1.5")], "bad-number", "'1.5' is not a count", 0),
    ([row(8), row(8, "half", 2)], "unknown-format", "1 rows of float sum; the sweep of 8..16 B has 2 or more sizes",
     0),
    ([row(8), row(16), row(8, "half", 2), row(8, "int32")], "unknown-format",
     "1 rows of half sum; the sweep of 8..16 B has 2 sizes: rows of another run", 2),
    ([row(8), row(16), row(8, "half", 2)], "truncated", "the sweep stops at 8 B; the next size, 16 B", 2),
])
def test_rows_that_do_not_fit_the_sweep(rows, kind, message, quoted):
    """Each refusal quotes its row: a table's last where the table as a whole does not fit."""
    text = run(None, marker=True, rows=rows, footer=FOOTER + END)
    with pytest.raises(ParseError) as e:
        parse_outputs(text, ARGS)
    assert e.value.kind == kind and message in e.value.message
    assert e.value.line == rows[quoted] and text.split("\n")[e.value.lineno - 1] == e.value.line


def test_a_wrong_count_needs_validation():
    c0 = run(None, marker=False, rows=ROWS, footer=FOOTER).replace("validation: 1", "validation: 0")
    assert refused(c0)[:2] == ("unknown-format", "a wrong count in a run without data check (validation: 0)")
    [s] = parse_outputs(run(None, marker=False, rows=ROWS, footer=FOOTER), ARGS)
    assert s.title.startswith("nThread 1 nGpus 1") and validated(s) == "yes"


def test_ncclgetlasterror_printed_bare_by_2_13_4_to_2_17_2_only_as_the_last_line():
    text = run(None, marker=False, rows=ROWS, footer=FOOTER)
    [s] = parse_outputs(text + "NET/IB : Got async event : port error\n", ARGS)
    assert s.meta["nccl_last_error"] == "NET/IB : Got async event : port error"
    assert len(parse_outputs(text + "some error\n" + text, ARGS)) == 2  # then the job's next run
    for after in ("some error\nmore\n", "#\n", "          32             8     float     sum\n", "32 wrong\n",
                  "NET/IB : x\n" + ROWS[0] + "\n"):
        assert refused(text + after)[:2] == ("unknown-format", "output after the footer ('# Avg bus bandwidth')")


def test_rounding_repeats_size_0_of_a_doubling_sweep_and_no_other():
    """reduce_scatter with 8 ranks from 1 B prints 0 B for 1..16 B (whole elements per rank): 0 may repeat;
    a non-zero size may not, in a doubling sweep."""
    params = ("# nThread 1 nGpus 1 minBytes 1 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
              "validation: 1 graph: 0")
    rows = [row(0), row(0), row(0), row(8), row(16)]
    [s] = parse_outputs(run(None, marker=True, params=params, rows=rows, footer=FOOTER + END), ["-b", "1", "-e", "16"])
    assert s.sizes == [0, 0, 0, 8, 16]
    assert refused(run(None, marker=True, params=params, rows=rows[:3] + [row(8), row(8)], footer=FOOTER + END))[:2] \
        == ("unknown-format", "message sizes do not increase")


@pytest.mark.parametrize("name", ["alltoall_perf", "sendrecv_perf", "alltoallv_perf_mpi", None])
def test_a_benchmark_that_checks_only_out_of_place_prints_na_in_place_with_validation_1(name):
    """alltoall, alltoallv and sendrecv: `reportErrors = in_place ? 0 : 1` (2.17.1 on an H200:
    tests/data/corpus/nccl-tests/alltoall_perf-2.17.1-h200-c1.out); a run without markers names no binary."""
    ip_na = [r[:-6] + "   N/A" for r in ROWS]
    if name:
        text = run(None, marker=True, rows=ip_na, footer=FOOTER + END).replace("all_reduce_perf", name)
    else:
        text = run(None, marker=False, rows=ip_na, footer=FOOTER)
    [s] = parse_outputs(text, ARGS)
    assert (s.benchmark, validated(s)) == (name, "yes")
    assert [(r["oop_wrong"], r["ip_wrong"]) for r in s.rows] == [(0, None), (0, None)]


@pytest.mark.parametrize("name, rows, line", [
    ("all_reduce_perf", [r[:-6] + "   N/A" for r in ROWS], 0),  # all_reduce checks in place too
    ("alltoall_perf", [ROWS[0], ROWS[1][:-6] + "   N/A"], 1),  # N/A in one in-place row only
    ("alltoall_perf", [r.replace("      0    ", "    N/A    ") for r in ROWS], 0),  # out of place unchecked
])
def test_na_in_place_with_validation_1_only_where_the_benchmark_checks_no_in_place_result(name, rows, line):
    text = run(None, marker=True, rows=rows, footer=FOOTER + END).replace("all_reduce_perf", name)
    assert refused(text) == ("unknown-format", "N/A for a wrong count in a run that checks its data (validation: 1)",
                             rows[line])


def test_a_device_line_without_its_using_devices_line_is_refused():
    """nccl-tests lists its ranks' devices under `# Using devices`: a rank's line anywhere else is no nccl-tests'."""
    text = (TOP / "tests" / "data" / "corpus" / "nccl-tests" / "all_reduce_perf-2.19.4-c2-repro.out").read_text()
    assert refused(text.replace("# Using devices\n", "")) == refused(text.replace("#\n# Using devices\n", "")) == (
        "unknown-format", "device line outside '# Using devices'",
        "#  Rank  0 Group  0 Pid   4100 on  nid001234 device  0 [0000:18:00] NVIDIA GH200 120GB")


def test_rccl_tests_version_block_alone_says_rocm():
    """rccl-tests' RCCL version block names ROCm buffers where no `rccl-tests: Version` line or asterisks remark
    does (the AAC10 job log without those two lines)."""
    text = (TOP / "tests" / "data" / "corpus" / "rccl-tests" /
            "all_reduce_perf-rccl-version-block-2nodes.out").read_text()
    lines = [line for line in text.splitlines(keepends=True)
             if not line.startswith("rccl-tests: Version") and "asterisks" not in line]
    assert [s.device for s in parse_outputs("".join(lines), [])] == ["ROCM"]
