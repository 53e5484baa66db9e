"""Property tests of the OSU parser: generated tables in every header form seen in real output
(tests/data/osu, the seeds) round-trip, and corrupted ones never give a silent pass."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commstack import benchmarks
from commstack.errors import ParseError
from commstack.results.parse import parse_output

OSU = [b for b in benchmarks.BENCHMARKS.values() if b.tool == "osu"]

# header column text per form, as OSU 5.7 / 7.2 / 7.5 print them
LATENCY = {"pt2pt": ["Latency (us)"], "one-sided": ["Latency (us)"], "collective": ["Avg Latency(us)"]}
FULL = ["Min Latency(us)", "Max Latency(us)", "Iterations"]
BANDWIDTH = ["Bandwidth (MB/s)"]
MBW_MR = ["MB/s", "Messages/s"]

LOADER = ("/usr/local/libexec/osu-micro-benchmarks/mpi/./pt2pt/osu_bw: /usr/lib/aarch64-linux-gnu/libnl-3.so.200: "
          "no version information available (required by /usr/lib64/libcxi.so.1)")
LAUNCHER_ERRORS = ["srun: error: nid001234: task 1: Segmentation fault (core dumped)",
                   "srun: Terminating StepId=1234.0",
                   "[nid001234:12345] *** Process received signal ***",
                   "slurmstepd: error: *** STEP 1234.0 ON nid001234 CANCELLED AT 2025-01-01T00:00:00 ***"]


@st.composite
def tables(draw):
    """(text, args, expected rows) of one OSU run."""
    bench = draw(st.sampled_from(OSU))
    version = draw(st.sampled_from(["5.7", "7.2", "7.5"]))
    full = bench.directory == "collective" and bench.metric == "latency_us" and draw(st.booleans())
    validation = version != "5.7" and draw(st.booleans())
    if bench.name == "osu_mbw_mr":
        names, cols = list(MBW_MR), ["bandwidth_MBps", "message_rate"]
    elif bench.metric == "bandwidth_MBps":
        names, cols = list(BANDWIDTH), ["bandwidth_MBps"]
    else:
        names, cols = list(LATENCY[bench.directory]), ["latency_us"]
    if full:
        names += FULL
        cols += ["min_latency_us", "max_latency_us", "iterations"]
    if validation:
        names.append("Validation")
        cols.append("validation")
    if bench.sized:
        lo_exp = draw(st.integers(0, 12))
        hi_exp = draw(st.integers(lo_exp, lo_exp + 10))
        sizes = [1 << e for e in range(lo_exp, hi_exp + 1)]
        args = ["-m", f"{sizes[0]}:{sizes[-1]}"]
        header = "# " + "  ".join(["Size", *names])
    else:
        sizes, args = [0], []
        header = "# " + "   ".join(names)
    rows, lines = [], []
    for size in sizes:
        row, fields = {"size": size}, [str(size)] if bench.sized else []
        for col in cols:
            if col == "iterations":
                row[col] = draw(st.integers(1, 10000))
                fields.append(str(row[col]))
            elif col == "validation":
                row[col] = "Pass"
                fields.append("passed" if bench.directory == "one-sided" else "Pass")
            else:
                row[col] = round(draw(st.floats(0, 1e7, allow_nan=False)), 2)
                fields.append(f"{row[col]:.2f}")
        rows.append(row)
        lines.append(fields[0].ljust(10) + "".join(f.rjust(18) for f in fields[1:]))
    device = draw(st.sampled_from(["", "-CUDA", "-ROCM"]))
    osu, api, name = bench.titles[0].split(" ", 2)
    title = f"{osu} {api}{device} {name}"  # OSU MPI-CUDA Latency Test, OSU MPI_Put-CUDA Latency Test
    head = [f"# {title} v{version}"]
    if bench.directory == "one-sided":
        head += ["# Window creation: MPI_Win_allocate", "# Synchronization: MPI_Win_flush"]
    if bench.name == "osu_mbw_mr":
        head += ["# [ pairs: 1 ] [ window size: 64 ]"]
    datatype = [] if version == "5.7" else ["# Datatype: MPI_CHAR."]
    # 7.2 point-to-point prints the datatype after the column header, the others before it
    head += [header, *datatype] if version == "7.2" and bench.directory == "pt2pt" else [*datatype, header]
    if draw(st.booleans()):
        head.insert(0, "")  # collectives start with an empty line
    return "\n".join(head + lines) + "\n", args, rows, len(head)


settings.register_profile("commstack", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("commstack")


@given(tables())
def test_well_formed_tables_round_trip(table):
    text, args, rows, _ = table
    assert parse_output(None, text, args).rows == rows


@given(tables(), st.data())
def test_loader_warnings_anywhere_keep_every_row(table, data):
    text, args, rows, _ = table
    lines = text.split("\n")
    i = data.draw(st.integers(0, len(lines) - 2))
    where = data.draw(st.sampled_from(["own line", "glued before", "glued after"]))
    lines[i] = {"own line": LOADER + "\n" + lines[i], "glued before": LOADER + lines[i],
                "glued after": lines[i] + LOADER}[where]
    s = parse_output(None, "\n".join(lines), args)
    assert s.rows == rows and s.warnings == [LOADER]


def never_passes(text, args):
    with pytest.raises(ParseError):
        parse_output(None, text, args)


@given(tables(), st.data())
def test_cut_output_never_passes(table, data):
    text, args, _, _ = table
    never_passes(text[:data.draw(st.integers(0, len(text) - 2))], args)


@given(tables(), st.data())
def test_garbled_number_never_passes(table, data):
    text, args, _, nhead = table
    lines = text.split("\n")
    i = data.draw(st.integers(nhead, len(lines) - 2))
    digits = [k for k, c in enumerate(lines[i]) if c.isdigit()]
    k = data.draw(st.sampled_from(digits))
    # not a digit, a space or a newline: those can make another valid number
    junk = data.draw(st.sampled_from(["x", ",", "-", "+", "e", ".", "\ufffd", "nan", " x", "_"]))
    lines[i] = lines[i][:k] + junk + lines[i][k + data.draw(st.integers(0, 1)):]
    never_passes("\n".join(lines), args)


@given(tables(), st.data())
def test_injected_launcher_error_never_passes(table, data):
    text, args, _, _ = table
    lines = text.split("\n")
    lines.insert(data.draw(st.integers(0, len(lines) - 1)), data.draw(st.sampled_from(LAUNCHER_ERRORS)))
    with pytest.raises(ParseError) as e:
        parse_output(None, "\n".join(lines), args)
    assert e.value.kind == "crashed"


@given(tables(), st.data())
def test_glued_unknown_warning_never_passes(table, data):
    text, args, _, nhead = table
    lines = text.split("\n")
    i = data.draw(st.integers(nhead, len(lines) - 2))
    warning = data.draw(st.sampled_from(["WARNING: unknown", "[1700000000.1] [h:1:0] ucp.c:1 UCX WARN x",
                                         "libfabric:1:1:cxi:core:x():1<warn> y"]))
    lines[i] = data.draw(st.sampled_from([warning + " " + lines[i], lines[i] + " " + warning]))
    never_passes("\n".join(lines), args)
