"""What OSU micro-benchmarks 5.3 - 7.5 print, and what a complete sweep is per release: titles, the lines
around a table, header names and their columns, and the default sizes of each generation of releases (from
each release's own source: docs/osu-versions.md). Data and pure functions; commstack.tools.osu reads outputs
with them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from commstack.errors import UnknownFormatError
from commstack.tools.base import Benchmark, Column

TAIL_PERCENTILES = (50, 75, 90, 95, 99)
#: canonical column name -> its Column, and the header texts (lower case) that name it; 5.x and 7.x write the same
_COLUMNS = {
    "size": (Column("B"), "size"),
    "latency_us": (Column("us", False, ("latency", "µs", 1.0)), "latency (us)", "avg latency(us)"),
    "min_latency_us": (Column("us", False), "min latency(us)"),
    "max_latency_us": (Column("us", False), "max latency(us)"),
    "iterations": (Column(None), "iterations"),
    "bandwidth_MBps": (Column("MB/s", True, ("bandwidth", "GB/s", 1e-3)), "bandwidth (mb/s)", "mb/s"),
    "message_rate": (Column("msg/s", True, ("message rate", "messages/s", 1.0)), "messages/s"),
    "validation": (Column(None), "validation"),
    # the non-blocking collectives (osu_i*): the whole call, the compute overlapped with it, the parts of it
    "overall_us": (Column("us", False, ("overall latency", "µs", 1.0)), "overall(us)"),
    "compute_us": (Column("us"), "compute(us)"),
    "coll_init_us": (Column("us"), "coll. init(us)"),
    "mpi_test_us": (Column("us"), "mpi_test(us)"),
    "mpi_wait_us": (Column("us"), "mpi_wait(us)"),
    "pure_comm_us": (Column("us", False, ("communication latency", "µs", 1.0)), "pure comm.(us)"),
    "min_comm_us": (Column("us"), "min comm.(us)"),
    "max_comm_us": (Column("us"), "max comm.(us)"),
    "overlap_pct": (Column("%", True, ("overlap", "%", 1.0)), "overlap(%)"),
    # 6.1+ -D (derived datatypes): the bytes one message carries
    "transmit_size": (Column("B"), "transmit size"),
    # osu_init, osu_hello (one line, no header): the processes that started (hello's only figure: a reference may
    # ask for all of them), and how long MPI_Init took them
    "processes": (Column(None, True, ("processes started", "", 1.0)),),
    "init_min_ms": (Column("ms"),),
    "init_max_ms": (Column("ms"),),
    "init_avg_ms": (Column("ms", False, ("MPI_Init time", "ms", 1.0)),),
    # 7.4+ --tail-lat: one column per percentile asked for (-z P50,P99)
    **{f"p{p}_tail_latency_us": (Column("us"), f"p{p} tail lat(us)") for p in TAIL_PERCENTILES},
    **{f"p{p}_tail_bandwidth_MBps": (Column("MB/s"), f"p{p} tail bw(mb/s)") for p in TAIL_PERCENTILES},
}
COLUMNS = {name: column for name, (column, *_) in _COLUMNS.items()}
OSU_COLUMNS = {text: name for name, (_, *texts) in _COLUMNS.items() for text in texts}
OSU_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # OSU prints %.2f: no sign, no exponent

OSU_TITLE = re.compile(r"^# (?P<api>OSU (?:MPI(?:_[A-Za-z_]+?)?|NCCL|RCCL))"
                       r"(?:-(?P<dev>CUDA MANAGED|CUDA|ROCM|OPENACC|SYCL|MANAGED))?"
                       r"(?P<name> .+? Test)(?: v(?P<ver>\d[\w.]*))?$")
# 7.3+ xccl benchmarks: each rank's first line; 7.4+ point-to-point xccl runs print no title, only these
XCCL_USING = re.compile(r"^#Using (NCCL|RCCL)$")

COUNTS = ("size", "iterations", "transmit_size")

# 7.x one-sided atomics (acc, fop, cas) write passed/failed, the others Pass/Fail
OSU_VALIDATION = {"Pass": "Pass", "Fail": "Fail", "passed": "Pass", "failed": "Fail"}

OSU_META = [
    (re.compile(r"^# Datatype: (\S+?)\.?$"), lambda m: {"datatype": m.group(1)}),
    (re.compile(r"^# \[ pairs: (\d+) \] \[ window size: (\d+) \]$"),
     lambda m: {"pairs": int(m.group(1)), "window_size": int(m.group(2))}),
    (re.compile(r"^# Window creation: (\S+)$"), lambda m: {"window_creation": m.group(1)}),
    (re.compile(r"^# Synchronization: (\S+)$"), lambda m: {"synchronization": m.group(1)}),
    # 7.x with -d: H(ost), D(evice) or managed memory, MD or MH (util/osu_util.c print_header)
    (re.compile(r"^# Send Buffer on (\w+) \((\w{1,2})\) and Receive Buffer on (\w+) \((\w{1,2})\)$"),
     lambda m: {"buffers": f"{m.group(2)},{m.group(4)}"}),
    # 7.5, the same for one-sided and the others
    (re.compile(r"^# Rank 0 Memory on (\w+) \((\w{1,2})\) and Rank 1 Memory on (\w+) \((\w{1,2})\)$"),
     lambda m: {"buffers": f"{m.group(2)},{m.group(4)}"}),
    # the non-blocking collectives, after their title
    (re.compile(r"^# Overall = Coll\. Init \+ Compute \+ MPI_Test \+ MPI_Wait$"), lambda m: {}),
]
# lines of osu_latency_mt (5.6+) and osu_latency_mp (5.7+), before their title (5.7 latency_mp: after it),
# and xccl's `#Using NCCL`: kept for the table whose title (or header) follows
OSU_PRELUDE = [
    (re.compile(r"^# Number of Sender threads: (\d+)$"), lambda m: {"sender_threads": int(m.group(1))}),
    (re.compile(r"^# Number of Receiver threads: (\d+)$"), lambda m: {"receiver_threads": int(m.group(1))}),
    (re.compile(r"^# Number of forked processes in sender: (\d+)$"), lambda m: {"sender_processes": int(m.group(1))}),
    (re.compile(r"^# Number of forked processes in receiver: (\d+)$"),
     lambda m: {"receiver_processes": int(m.group(1))}),
    (XCCL_USING, lambda m: {"xccl": m.group(1)}),
]
# osu_init's and osu_hello's one line instead of a table
INIT_LINE = re.compile(r"^nprocs: (\d+), min: (\d+) ms, max: (\d+) ms, avg: (\d+) ms$")
HELLO_LINE = re.compile(r"^This is a test with (\d+) processes$")


# instead of a table, on an unknown option; 7.x one-sided latency tests print their own usage line
OSU_USAGE = re.compile(r"^Usage: (?:\./)?osu_\w+ (?:\[options\]|-\w .*)$")


def header_columns(line: str) -> list[str] | None:
    """The columns a header line names, each a known column name (`# Size  Latency (us)`; 5.x-6.x osu_ibarrier's
    has no `#`; 7.4's tail columns may stand one space after the one before: `Bandwidth (MB/s) P50 Tail BW(MB/s)`).
    No column name and a space begin another (a test keeps it so): the first name that fits is the only one."""
    rest, cols = line.removeprefix("#").strip().lower(), []
    while rest:
        name = next((n for n in OSU_COLUMNS if rest.startswith(n) and rest[len(n):len(n) + 1] in ("", " ")), None)
        if name is None:
            return None
        cols.append(OSU_COLUMNS[name])
        rest = rest[len(name):].lstrip()
    return cols


def matched_meta(patterns: list, line: str) -> dict[str, Any] | None:
    return next((meta(m) for pattern, meta in patterns if (m := pattern.match(line))), None)


def release_numbers(version: str | None) -> tuple[int, ...]:
    """(major, minor, ...) of a printed version (`7.5`, `5.3.2`, `7.0-lrbison2`); () when there is none."""
    return tuple(int(n) for n in re.findall(r"\d+", (version or "").split("-")[0]))


#: the first release of each generation of default sweeps (docs/osu-versions.md, its table's columns)
GENERATIONS = ("5.3", "5.4", "7.1", "7.5")
LAST_KNOWN = (7, 5)


def family(version: str | None) -> str:
    """The generation a printed version belongs to, the key of Benchmark.default_sizes; "" where no version
    is printed (7.4+ xccl point-to-point), the version itself where its defaults are not known (before 5.3,
    after 7.5.x)."""
    release = release_numbers(version)
    if not release:
        return ""
    if release[:2] > LAST_KNOWN:
        return version
    return next((g for g in reversed(GENERATIONS) if release >= release_numbers(g)), version)


# Default sweeps per generation (family), from each release's source: docs/osu-versions.md. "": the 7.4+ xccl
# point-to-point runs, which print no title and so no version.
M4, M1 = 4194304, 1048576
LAT_SIZES = (("5.3", (0, M4)), ("5.4", (0, M4)), ("7.1", (1, M4)), ("7.5", (1, M4)))
PT2PT_SIZES = (("5.3", (1, M4)), ("5.4", (1, M4)), ("7.1", (1, M4)), ("7.5", (1, M4)))
ONE_SIDED_LAT_SIZES = (("5.3", (0, M4)), ("5.4", (1, M4)), ("7.1", (1, M4)), ("7.5", (1, M4)))
COLL_SIZES = (("5.3", (1, M1)), ("5.4", (1, M1)), ("7.1", (1, M1)), ("7.5", (1, M1)))
REDUCE_SIZES = (("5.3", (4, M1)), ("5.4", (4, M1)), ("7.1", (1, M1)), ("7.5", (1, M1)))
ATOMIC_SIZES = (("5.3", (8, 8)), ("5.4", (8, 8)), ("7.1", (1, 1)), ("7.5", (1, 1)))
# xccl (NCCL/RCCL) loops count bytes (latency from 0 B) and floats (reductions) in every release
XCCL_LAT_SIZES = (*((g, (0, M4)) for g in GENERATIONS), ("", (0, M4)))
XCCL_PT2PT_SIZES = tuple((g, (1, M4)) for g in GENERATIONS)
XCCL_COLL_SIZES = tuple((g, (1, M1)) for g in GENERATIONS)
XCCL_REDUCE_SIZES = tuple((g, (4, M1)) for g in GENERATIONS)

#: bytes of the datatypes OSU 7.x names on its `# Datatype:` line: -T takes mpi_char, mpi_int and mpi_float, and
#: a reduction's mpi_char is MPI_SIGNED_CHAR (7.5.1's Open MPI outputs in the corpus)
DATATYPE_BYTES = {"MPI_CHAR": 1, "MPI_SIGNED_CHAR": 1, "MPI_INT": 4, "MPI_FLOAT": 4}
#: osu_init's and osu_hello's one line, as columns
STARTUP_COLUMNS = {"osu_init": ["processes", "init_min_ms", "init_max_ms", "init_avg_ms"],
                   "osu_hello": ["processes"]}


def header_benchmarks(benchmarks: Iterable[Benchmark], cols: list[str], meta: dict[str, Any]) -> list[Benchmark]:
    """The benchmarks whose table has these columns where no title names one: a figure column is a benchmark's
    metric (osu_mbw_mr's MB/s beside its Messages/s); one-sided ones print their window lines before it; an
    xccl run (`#Using NCCL`) without one is a 7.4+ point-to-point xccl benchmark (its collectives print theirs)."""
    def prints(b: Benchmark) -> bool:
        return b.directory != "startup" and b.sized == (cols[0] == "size") \
            and b.directory.endswith("one-sided") == ("window_creation" in meta) \
            and ("xccl" not in meta or b.name.startswith("osu_xccl") and b.directory.endswith("pt2pt")) \
            and (b.name == "osu_mbw_mr" if "message_rate" in cols else b.metric in cols and b.name != "osu_mbw_mr")
    return [b for b in benchmarks if prints(b)]


UNTITLED_NAMED = 6  # the benchmarks an error names that a table without a title may be; the rest counted


def untitled_benchmark(benchmarks: Iterable[Benchmark], line: str, lineno: int, meta: dict[str, Any]) \
        -> Benchmark | None:
    """The one of `benchmarks` a header with no title before it can be (None: the line is no header); where
    several print the same table, an error naming them."""
    cols = header_columns(line)
    if not cols:
        return None
    named = header_benchmarks(benchmarks, cols, meta)
    if len(named) == 1:
        return named[0]
    # none, or two and more: the first UNTITLED_NAMED named, the others counted
    names = [b.name for b in named][:UNTITLED_NAMED] + [f"{len(named) - UNTITLED_NAMED} more"] * (
        len(named) > UNTITLED_NAMED)
    listed = f"{', '.join(names[:-1])} and {names[-1]} print" if names else "no OSU benchmark prints"
    raise UnknownFormatError(f"a table without a title: {listed} the same; run one of them by name, or give its "
                             f"title", line, lineno)
