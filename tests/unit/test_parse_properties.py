"""Property tests of the parsers: generated outputs in every header form seen in real output
(tests/data/osu, the seeds, OSU's own print_header) round-trip, and corrupted ones never give a
silent pass. The sizes a sweep prints follow OSU's loops (util/osu_util.c, the benchmarks' `for (size
= ...)`), written out here on their own rather than taken from the parser."""

from dataclasses import dataclass

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commstack import benchmarks
from commstack.tools import Benchmark, nccl_tests, osu
from commstack.errors import ParseError
from commstack.tools import noise
from commstack.results.parse import parse_outputs, parse_results, validated
from commstack.results.tables import is_title

OSU = [b for b in osu.BENCHMARKS.values() if b.directory in ("pt2pt", "one-sided", "collective")]  # MPI tables
NCCL = list(nccl_tests.BENCHMARKS.values())

# header column text per form, as OSU 5.7 / 7.2 / 7.5 print them
LATENCY = {"pt2pt": ["Latency (us)"], "one-sided": ["Latency (us)"], "collective": ["Avg Latency(us)"]}
FULL = ["Min Latency(us)", "Max Latency(us)", "Iterations"]
# the non-blocking collectives (osu_i*), and with -f
NBC = ["Overall(us)", "Compute(us)", "Pure Comm.(us)", "Overlap(%)"]
NBC_FULL = ["Overall(us)", "Compute(us)", "Coll. Init(us)", "MPI_Test(us)", "MPI_Wait(us)", "Pure Comm.(us)",
            "Min Comm.(us)", "Max Comm.(us)", "Overlap(%)"]
NBC_COLUMNS = {"Overall(us)": "overall_us", "Compute(us)": "compute_us", "Coll. Init(us)": "coll_init_us",
               "MPI_Test(us)": "mpi_test_us", "MPI_Wait(us)": "mpi_wait_us", "Pure Comm.(us)": "pure_comm_us",
               "Min Comm.(us)": "min_comm_us", "Max Comm.(us)": "max_comm_us", "Overlap(%)": "overlap_pct"}
BANDWIDTH = ["Bandwidth (MB/s)"]
MBW_MR = ["MB/s", "Messages/s"]
ELEMENT = {"MPI_CHAR": 1, "MPI_INT": 4, "MPI_FLOAT": 4}
BUFFERS = ["HOST (H)", "DEVICE (D)", "MANAGED (MD)", "MANAGED (MH)"]

LOADER = ("/usr/local/libexec/osu-micro-benchmarks/mpi/./pt2pt/osu_bw: /usr/lib/aarch64-linux-gnu/libnl-3.so.200: "
          "no version information available (required by /usr/lib64/libcxi.so.1)")
LAUNCHER_ERRORS = ["srun: error: nid001234: task 1: Segmentation fault (core dumped)",
                   "srun: Terminating StepId=1234.0",
                   "[nid001234:12345] *** Process received signal ***",
                   "slurmstepd: error: *** STEP 1234.0 ON nid001234 CANCELLED AT 2025-01-01T00:00:00 ***",
                   "slurmstepd-nid001234: error: *** STEP 1234.0 ON nid001234 CANCELLED AT 2025-01-01T00:00:00 ***",
                   "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD",
                   "mpirun detected that one or more processes exited with non-zero status, thus causing"]
GLUED_WARNINGS = ["WARNING: unknown", "[1700000000.1] [h:1:0] ucp.c:1 UCX WARN x",
                  "libfabric:1:1:cxi:core:x():1<warn> y"]


@dataclass
class Output:
    text: str
    args: list[str]
    tables: list[list[dict]]   # the rows of each table, as the parser gives them
    data: list[int]            # indexes (in text.split("\n")) of the data rows
    failed: bool = False       # the output holds the benchmark's own failed data check


# 5.x reductions count MPI_FLOATs (4 B) in their loop
REDUCTIONS = {"osu_allreduce", "osu_reduce", "osu_reduce_scatter", "osu_iallreduce", "osu_ireduce",
              "osu_ireduce_scatter"}


def default_sizes(bench: Benchmark, version: str) -> tuple[int, int]:
    """(lo, hi) of a run without -m, as OSU 5.7 and 7.2 ran in tests/data/osu: point-to-point and one-sided
    to 4 MiB, collectives to 1 MiB; 5.x latency from 0 B, 5.x reductions from one float; cas and fop one
    row (5.x: 8 B, 7.x: 1 B); barrier no size."""
    v5 = version.startswith("5")
    if not bench.sized:
        return 0, 0
    if bench.name in ("osu_cas_latency", "osu_fop_latency"):
        return (8, 8) if v5 else (1, 1)
    if bench.directory == "collective":
        return (4 if v5 and bench.name in REDUCTIONS else 1), 1048576
    return (0 if v5 and bench.name in ("osu_latency", "osu_multi_lat", "osu_latency_mt", "osu_latency_mp") else 1), \
        4194304


def osu_sizes(bench: Benchmark, version: str, lo: int, hi: int, element: int) -> list[int]:
    """The sizes OSU's loop prints from lo to hi: 5.x reductions count whole floats; 7.x doubles from lo
    (0, then 1) and skips a size that holds no whole element of the datatype."""
    if version.startswith("5") and bench.name in REDUCTIONS:
        count, out = max(1, lo // 4), []
        while count * 4 <= hi:
            out.append(count * 4)
            count *= 2
        return out
    out, size = [], lo
    while size <= hi:
        if not element or size // element:
            out.append(size)
        size = size * 2 if size else 1
    return out


def value(draw, col: str, fail_at: bool, one_sided: bool):
    """(parsed, printed) of one cell."""
    if col == "iterations":
        n = draw(st.integers(1, 10000))
        return n, str(n)
    if col == "validation":
        word = ("failed" if fail_at else "passed") if one_sided else ("Fail" if fail_at else "Pass")
        return ("Fail" if fail_at else "Pass"), word
    x = round(draw(st.floats(0.01, 1e7, allow_nan=False)), 2)
    return x, f"{x:.2f}"


@st.composite
def osu_outputs(draw, fail: bool = False, bench: str | None = None, version: str | None = None,
                sizes: str | None = None):
    """One OSU run's output: title (with device), one-sided window lines, mbw_mr pairs, 7.x datatype
    (and -T all: a table per datatype), the 7.x Send Buffer line, the header in its version's place.
    `bench`, `version` and `sizes` (-m LO:HI, -m 1:HI, -m HI, none) fix what is drawn otherwise."""
    bench = benchmarks.get(bench) if bench else draw(st.sampled_from([b for b in OSU if not fail or b.sized]))
    version = version or draw(st.sampled_from(["5.7", "7.2", "7.5"]))
    v7 = not version.startswith("5")
    full = bench.directory == "collective" and bench.metric in ("latency_us", "overall_us") and draw(st.booleans())
    validation = v7 and (fail or draw(st.booleans()))
    if bench.name == "osu_mbw_mr":
        names, cols = list(MBW_MR), ["bandwidth_MBps", "message_rate"]
    elif bench.metric == "overall_us":
        names = list(NBC_FULL if full else NBC)
        cols = [NBC_COLUMNS[n] for n in names]
    elif bench.metric == "bandwidth_MBps":
        names, cols = list(BANDWIDTH), ["bandwidth_MBps"]
    else:
        names, cols = list(LATENCY[bench.directory]), ["latency_us"]
    if full and bench.metric == "latency_us":
        names += FULL
        cols += ["min_latency_us", "max_latency_us", "iterations"]
    if validation:
        names.append("Validation")
        cols.append("validation")
    datatypes = ["MPI_CHAR"] if v7 else [None]
    args: list[str] = []
    if v7 and bench.directory != "one-sided" and draw(st.booleans()):
        t = draw(st.sampled_from(["mpi_char", "mpi_int", "mpi_float", "all"]))
        args += ["-T", t]
        datatypes = list(ELEMENT) if t == "all" else [t.upper()]
    default_lo, default_hi = default_sizes(bench, version)
    sizes = sizes or draw(st.sampled_from(["-m LO:HI", "-m HI", "none"]))
    if not bench.sized or bench.name in ("osu_cas_latency", "osu_fop_latency") or sizes == "none":
        lo, hi = default_lo, default_hi  # one row, whatever -m says; or no -m
    elif sizes in ("-m LO:HI", "-m 1:HI"):
        lo = 1 if sizes == "-m 1:HI" else 1 << draw(st.integers(0, 12))
        hi = max(lo << draw(st.integers(0, 8)), 4)  # a sweep below its datatype's 4 B prints no row
        args += ["-m", f"{lo}:{hi}"]
    else:  # -m HI: the default start (5.x latency: 0 B)
        lo, hi = default_lo, 1 << draw(st.integers(3, 12))
        args += ["-m", str(hi)]
    device = draw(st.sampled_from(["", "-CUDA", "-ROCM"]))
    osu, api, name = bench.titles[0].split(" ", 2)
    title = f"# {osu} {api}{device} {name} v{version}"  # OSU MPI-CUDA Latency Test, OSU MPI_Put-CUDA ...
    lines = [title]
    if bench.name == "osu_mbw_mr" and version == "7.2":
        lines += [title, ""]  # 7.2 prints its title twice
    if bench.directory == "one-sided":
        lines += ["# Window creation: MPI_Win_allocate", "# Synchronization: MPI_Win_flush"]
    if bench.name == "osu_mbw_mr":
        lines += ["# [ pairs: 1 ] [ window size: 64 ]"]
    if v7 and device and bench.directory == "pt2pt":
        lines.append(f"# Send Buffer on {draw(st.sampled_from(BUFFERS))} and Receive Buffer on "
                     f"{draw(st.sampled_from(BUFFERS))}")
    header = "# " + ("  ".join(["Size", *names]) if bench.sized else "   ".join(names))
    # 7.2 heads a point-to-point test's later datatypes with the collectives' header (print_only_header)
    later = "# Size       Avg Latency(us)" + "        Validation" * validation
    tables, data, failed = [], [], False
    for n, datatype in enumerate(datatypes):
        element = ELEMENT.get(datatype, 0)
        sizes = osu_sizes(bench, version, lo, hi, element) if bench.sized else [0]
        dt = [f"# Datatype: {datatype}."] if datatype else []
        # 7.2 point-to-point prints the datatype after the column header, the others before it
        if version == "7.2" and bench.directory == "pt2pt":
            lines += [header, *dt] if n == 0 else [*dt, later]
        else:
            lines += [*dt, header]
        fail_at = draw(st.integers(0, len(sizes) - 1)) if fail and validation else -1
        rows = []
        for i, size in enumerate(sizes):
            row, fields = {"size": size}, [str(size)] if bench.sized else []
            for col in cols:
                row[col], text = value(draw, col, i == fail_at, bench.directory == "one-sided")
                fields.append(text)
            rows.append(row)
            data.append(len(lines))
            lines.append(fields[0].ljust(10) + "".join(f.rjust(18) for f in fields[1:]))
            if i == fail_at:
                failed = True
                if bench.directory != "one-sided":  # OSU 7.x stops there and exits 1
                    lines.append(f"DATA VALIDATION ERROR: /osu/{bench.name} exited with status 1 on message "
                                 f"size {size}.")
                    break
        tables.append(rows)
        if failed:
            break
    if draw(st.booleans()):
        lines.insert(0, "")  # collectives start with an empty line
        data = [i + 1 for i in data]
    return Output("\n".join(lines) + "\n", args, tables, data, failed)


# nccl-tests' formats by family (commstack.tools.nccl_tests' docstring, from the sources of each tag)
NCCL_FAMILIES = ["2.0", "2.13", "2.17.1", "2.17.3", "2.17.5", "2.19"]


def nccl_wrong(draw, family: str, fail: bool) -> tuple[str, int]:
    """A wrong count as the family prints it (%5g, %6g from 2.17.3), and its value."""
    n = draw(st.sampled_from([1, 3, 96, 4096, 1048576, 16777216])) if fail else 0
    return ("%5g" if family in ("2.13", "2.17.1") else "%6g") % n, round(float("%g" % n))


@st.composite
def nccl_outputs(draw, fail: bool = False):
    """nccl-tests as each family prints it: 2.0's error column without title, 2.13's #wrong without markers,
    the markers of 2.16.7, 2.17.3's %6g, 2.17.4's version line, 2.17.7's trailing `#`; -c 0's N/A columns."""
    family = draw(st.sampled_from(NCCL_FAMILIES))
    bench = draw(st.sampled_from(NCCL))
    checked = fail or draw(st.booleans())
    lo = 8 << draw(st.integers(0, 10))
    hi = lo << draw(st.integers(0, 8))
    old = family == "2.0"
    version = {"2.17.5": "2.17.5", "2.19": f"2.19.{draw(st.integers(0, 6))}"}.get(family)
    lines = [f"# nccl-tests version {version} nccl-headers=22803 nccl-library=22803"] if version else []
    if family != "2.0" and family != "2.13":
        lines.append(f"# Collective test starting: {bench.name}")
    lines.append(f"# nThread 1 nGpus 1 minBytes {lo} maxBytes {hi} step: 2(factor) warmup iters: 5 iters: 20 "
                 + (f"validation: {int(checked)} " if old else f"agg iters: 1 validation: {int(checked)} graph: 0"
                    + " unalign: 0" * (family == "2.19")))
    lines += ["#", "# Using devices"]
    ranks = draw(st.integers(1, 8))
    lines += [f"#   Rank {r:2d} Pid {1000 + r:6d} on  nid{r // 4:06d} device {r % 4:2d} [0x{r:02x}] Tesla V100"
              if old else f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on  nid{r // 4:06d} device {r % 4:2d} "
              f"[00{r % 4}9:01:00] NVIDIA GH200 120GB" for r in range(ranks)]
    if old:  # all_reduce's columns in 2.0-2.9
        lines += ["#", "#" + " " * 53 + "out-of-place                       in-place",
                  "#       size         count    type   redop     time   algbw   busbw  error     time   algbw"
                  "   busbw  error",
                  "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
                  "  (GB/s)"]
    else:
        lines += ["#", "#" + " " * 62 + "out-of-place                       in-place",
                  "#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
                  "   algbw   busbw #wrong",
                  "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)"
                  "  (GB/s)  (GB/s)"]
    rows, data, size = [], [], lo
    fail_at = draw(st.integers(0, 8)) if fail else -1
    while size <= hi:
        t, alg, bus = (round(draw(st.floats(0.1, 1e5)), 1), round(draw(st.floats(0, 500)), 2),
                       round(draw(st.floats(0, 500)), 2))
        row = {"size": size, "count": size // 4, "type": "float", "redop": "sum"}
        if old:
            error = draw(st.sampled_from([0.0, 1e-06, 2e-07])) if checked else None
            shown = "%5.0e" % error if checked else "  N/A"
            row.update(oop_time_us=t, oop_algbw_GBps=alg, oop_busbw_GBps=bus, oop_error=error, ip_time_us=t,
                       ip_algbw_GBps=alg, ip_busbw_GBps=bus, ip_error=error)
            line = (f"{size:12d}  {size // 4:12d}   float     sum  {t:7.1f}  {alg:6.2f}  {bus:6.2f}  {shown}  {t:7.1f}"
                    f"  {alg:6.2f}  {bus:6.2f}  {shown}")
        else:
            shown, wrong = nccl_wrong(draw, family, len(rows) == fail_at)
            ok = ("%5g" if family in ("2.13", "2.17.1") else "%6g") % 0
            if not checked:
                shown, wrong, ok = "  N/A" if family in ("2.13", "2.17.1") else "   N/A", None, "  N/A"
            row.update(root=-1, oop_time_us=t, oop_algbw_GBps=alg, oop_busbw_GBps=bus, oop_wrong=wrong, ip_time_us=t,
                       ip_algbw_GBps=alg, ip_busbw_GBps=bus, ip_wrong=None if wrong is None else 0)
            line = (f"{size:12d}  {size // 4:12d}     float     sum      -1  {t:7.1f}  {alg:6.2f}  {bus:6.2f}  "
                    f"{shown}  {t:7.1f}  {alg:6.2f}  {bus:6.2f}  {ok}")
        rows.append(row)
        data.append(len(lines))
        lines.append(line)
        size *= 2
    failed = any(r.get("oop_wrong") for r in rows)
    oob = "1 FAILED" if fail and old else ("1 FAILED" if failed else "0 OK")
    failed = failed or (fail and old)
    lines += [f"# Out of bounds values : {oob}", f"# Avg bus bandwidth    : {draw(st.floats(0, 500)):.4f} ", "#"]
    if family != "2.0" and family != "2.13":
        lines.append(f"# Collective test concluded: {bench.name}")
    lines += ["#"] * (family == "2.19") + [""] * (family != "2.0")  # NCCL's last error: an empty line
    return Output("\n".join(lines) + "\n", ["-b", str(lo), "-e", str(hi), "-f", "2"], [rows], data, failed)


@st.composite
def pingpong_outputs(draw, fail: bool = False):
    """Our mpi-pingpong (header, Check column, end line) or the OLCF program it follows (rows only)."""
    ours = fail or draw(st.booleans())
    lo = 8 << draw(st.integers(0, 10))
    hi = lo << draw(st.integers(0, 8))
    lines = [f"# mpi-pingpong v1.0 mode={draw(st.sampled_from(['cpu', 'staged', 'cuda-aware']))} ranks=2 loops=10 "
             f"warmup=5 min={lo} max={hi}"] if ours else []
    rows, data, size, failed = [], [], lo, False
    fail_at = draw(st.integers(0, 8)) if fail else -1
    while size <= hi:
        t, bw = round(draw(st.floats(1e-9, 10)), 9), round(draw(st.floats(1e-9, 100)), 9)
        row = {"size": size, "time_s": t, "bandwidth_GiBps": bw}
        line = f"Transfer size (B): {size:10d}, Transfer Time (s): {t:15.9f}, Bandwidth (GB/s): {bw:15.9f}"
        if ours:
            row["check"] = "Fail" if len(rows) == fail_at else "Pass"
            line += f", Check: {row['check']}"
        rows.append(row)
        data.append(len(lines))
        lines.append(line)
        if row.get("check") == "Fail":
            failed = True
            lines.append(f"DATA VALIDATION ERROR: size {size}, first wrong byte at 3 on rank 1")
        size *= 2
    if ours:
        lines.append(f"# mpi-pingpong done: {'data check FAILED' if failed else 'all sizes passed'}")
    return Output("\n".join(lines) + "\n", ["-b", str(lo), "-e", str(hi)], [rows], data, failed)


OUTPUTS = st.one_of(osu_outputs(), nccl_outputs(), pingpong_outputs())
FAILED = st.one_of(osu_outputs(fail=True), nccl_outputs(fail=True), pingpong_outputs(fail=True)).filter(
    lambda o: o.failed)

settings.register_profile("commstack", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
settings.load_profile("commstack")


def kind(text: str, args: list[str]) -> str:
    try:
        parse_outputs(text, args)
    except ParseError as e:
        return e.kind
    return "ok"


@given(OUTPUTS)
def test_well_formed_outputs_round_trip(out):
    assert [s.rows for s in parse_outputs(out.text, out.args)] == out.tables


@pytest.mark.parametrize("sizes", ["none", "-m 1:HI"])
@pytest.mark.parametrize("version", ["5.7", "7.2"])
@pytest.mark.parametrize("bench", [b.name for b in OSU])
@settings(max_examples=2)
@given(data=st.data())
def test_every_osu_benchmark_with_its_default_sizes_and_from_one_byte(bench, version, sizes, data):
    """Every OSU benchmark and major version, with no -m and from 1 B: a wrong default or start in the
    parser's table cannot hide behind the random draw."""
    out = data.draw(osu_outputs(bench=bench, version=version, sizes=sizes))
    assert [s.rows for s in parse_outputs(out.text, out.args)] == out.tables


@given(OUTPUTS, st.data())
def test_loader_warnings_anywhere_keep_every_row(out, data):
    lines = out.text.split("\n")
    i = data.draw(st.integers(0, len(lines) - 2))
    where = data.draw(st.sampled_from(["own line", "glued before", "glued after"]))
    lines[i] = {"own line": LOADER + "\n" + lines[i], "glued before": LOADER + lines[i],
                "glued after": lines[i] + LOADER}[where]
    sweeps = parse_outputs("\n".join(lines), out.args)
    assert [s.rows for s in sweeps] == out.tables and [n.line for s in sweeps for n in s.notes] == [LOADER]


@given(OUTPUTS, st.data())
def test_cut_output_never_passes(out, data):
    # a cut takes at least one printed character: nccl-tests 2.13-2.16.6 end with NCCL's last error on a line
    # of its own, usually empty, and an output without that blank line is whole
    assert kind(out.text[:data.draw(st.integers(0, len(out.text.rstrip()) - 1))], out.args) != "ok"


@given(OUTPUTS)
def test_missing_first_row_is_truncated(out):
    lines = out.text.split("\n")
    del lines[out.data[0]]
    text = "\n".join(lines)
    assert kind(text, out.args) == ("truncated" if text.strip() else "empty")  # OLCF's format: rows only


@given(OUTPUTS, st.data())
def test_garbled_number_never_passes(out, data):
    lines = out.text.split("\n")
    i = data.draw(st.sampled_from(out.data))
    digits = [k for k, c in enumerate(lines[i]) if c.isdigit()]
    k = data.draw(st.sampled_from(digits))
    # not a digit, a space or a newline: those can make another valid number; OSU prints no sign, so
    # a sign is garbage there only (nccl-tests and mpi-pingpong would read -61.7 as a number)
    osu = out.text.lstrip().startswith("# OSU")
    junk = data.draw(st.sampled_from(["x", ",", "e", ".", "\ufffd", "nan", " x", "_"] + ["-", "+"] * osu))
    lines[i] = lines[i][:k] + junk + lines[i][k + data.draw(st.integers(0, 1)):]
    assert kind("\n".join(lines), out.args) != "ok"


@given(OUTPUTS, st.data())
def test_injected_launcher_error_is_crashed(out, data):
    lines = out.text.split("\n")
    lines.insert(data.draw(st.integers(0, len(lines) - 1)), data.draw(st.sampled_from(LAUNCHER_ERRORS)))
    assert kind("\n".join(lines), out.args) == "crashed"


@given(OUTPUTS, st.data())
def test_glued_unknown_warning_never_passes(out, data):
    lines = out.text.split("\n")
    i = data.draw(st.sampled_from(out.data))
    warning = data.draw(st.sampled_from(GLUED_WARNINGS))
    lines[i] = data.draw(st.sampled_from([warning + " " + lines[i], lines[i] + " " + warning]))
    assert kind("\n".join(lines), out.args) != "ok"


@given(FAILED, st.booleans())
def test_a_failed_data_check_is_validation_failed_also_with_the_crash_after_it(out, crash):
    text = out.text + ("srun: error: nid001234: task 0: Exited with exit code 1\nsrun: Terminating StepId=1.0\n"
                       if crash else "")
    assert kind(text, out.args) == "validation-failed"


@given(nccl_outputs(), st.integers(1, 3))
def test_nccl_validation_is_a_fact_and_each_datatype_a_table(out, types):
    """`validation: 0` (N/A columns) is complete and not validated, a checked run validated; with -d all the
    sweep again per datatype (the same rows, another type name) is a table of its own."""
    lines = out.text.split("\n")
    rows = [lines[i] for i in out.data]
    more_types = ("int32", "uint32")[:types - 1]
    more = [r.replace("   float", f"{t:>8s}") for t in more_types for r in rows]  # as -d all prints them
    last = out.data[-1] + 1
    sweeps = parse_outputs("\n".join(lines[:last] + more + lines[last:]), out.args)
    want = "yes" if "validation: 1" in out.text else "no"
    assert [(s.meta["type"], s.rows == out.tables[0] if not i else len(s.rows), validated(s))
            for i, s in enumerate(sweeps)] == [("float", True, want)] + [(t, len(rows), want) for t in more_types]


# ------------------------------------------------------------------ issue 25: launchers' lines, several tables

KNOWN_LINES = [p.example for p in noise.PATTERNS]


@given(OUTPUTS, st.data())
def test_known_launcher_lines_between_any_lines_are_notes_and_keep_every_row(out, data):
    """A known launcher or runtime line (tools.noise) on its own line anywhere, a table's rows among
    them, keeps every row and is a note of the table with its source."""
    lines = out.text.split("\n")
    i = data.draw(st.integers(0, len(lines) - 2))
    known = data.draw(st.sampled_from(KNOWN_LINES))
    lines.insert(i, known)
    results = parse_results("\n".join(lines), out.args)
    assert [r.verdict for r in results] == ["complete"] * len(out.tables)
    assert [r.sweep.rows for r in results] == out.tables
    assert [(n.lineno, n.line) for r in results for n in r.notes] == [(i + 1, known)]


@given(OUTPUTS)
def test_tag_output_prefixes_on_every_line_keep_every_row(out):
    tagged = "".join(f"[1,0]<stdout>:{line}\n" for line in out.text.splitlines())
    assert [s.rows for s in parse_outputs(tagged, out.args)] == out.tables


@given(OUTPUTS, st.data())
def test_a_known_line_glued_to_a_row_never_passes(out, data):
    lines = out.text.split("\n")
    i = data.draw(st.sampled_from(out.data))
    known = data.draw(st.sampled_from(KNOWN_LINES))
    lines[i] = data.draw(st.sampled_from([known + lines[i], lines[i] + known, known + " " + lines[i].strip()]))
    assert kind("\n".join(lines), out.args) != "ok"


@given(st.one_of(osu_outputs(), nccl_outputs()), st.data())
def test_several_tables_per_file_each_with_its_own_verdict(out, data):
    """A job log of the same run twice, a shell banner between them, the second cut short at one of its
    rows: the first table is complete, the second truncated, each on its own lines."""
    lines = out.text.rstrip("\n").split("\n")
    cut = data.draw(st.sampled_from([i for i in out.data if i > min(out.data)] or [min(out.data)]))
    banner = "=== the same benchmark again ==="
    text = out.text + banner + "\n" + "\n".join(lines[:cut]) + "\n"
    results = parse_results(text, out.args)
    n = len(out.tables)
    assert [r.verdict for r in results[:n]] == ["complete"] * n
    assert [r.sweep.rows for r in results[:n]] == out.tables
    assert results[n - 1].notes[-1].line == banner
    title = next(i for i, line in enumerate(lines) if is_title(line.rstrip()))  # the second table starts there
    assert results[-1].verdict == "truncated" and results[n].first == len(out.text.splitlines()) + 1 + title + 1
