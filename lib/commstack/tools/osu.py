"""OSU micro-benchmarks (5.x-7.5): the MPI layer's benchmarks, one MPI program of N ranks.

The title line (`# OSU MPI Bandwidth Test v7.2`, `# OSU MPI-CUDA ...` with device buffers, `# OSU NCCL-CUDA ...`
for the xccl benchmarks) names the benchmark and its version, whose generation (`family`) picks the default
sizes; those come from each release's own source (its options' defaults and size loops, read for 5.3 to 7.5:
docs/osu-versions.md) and are checked against real runs (tests/data/osu, tests/data/corpus/osu*, the seeds).
The header names the columns. The binaries live under
libexec/osu-micro-benchmarks/mpi of an install prefix (--osu-prefix, COMMSTACK_OSU_PREFIX, the local
Spack env's, or installed there by the pinned Spack); in the osu-mb image under its WORKDIR.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from commstack.errors import BadNumberError, BinaryNotFoundError, TruncatedError, UnknownFormatError
from commstack.results.lines import (VALIDATION_ERROR, Sweep, Text, assign_warnings, check_last_line, count,
                                     cut_number, cut_row, number, own_lines)
from commstack.spack import find_spack
from commstack.spack.install import SpackInstallError, install, location
from commstack.tools.base import Benchmark, Column, Program, SizeFlags, Tool

OSU_HINT = ("give an OSU install with --osu-prefix PREFIX (or COMMSTACK_OSU_PREFIX=PREFIX), or let `commstack run` "
            "build it with the pinned Spack (without --no-build)")
#: what fixes a failed build here: most often no network for the sources
OSU_FIX = ("to fix it offline: on a connected machine `bin/commstack mirror create local DIR`, bring DIR here and "
           "`bin/commstack setup --mirror DIR`, then run again; or give an install: --osu-prefix PREFIX "
           "(or COMMSTACK_OSU_PREFIX=PREFIX)")

TAIL_PERCENTILES = (50, 75, 90, 95, 99)
COLUMNS = {
    "size": Column("B"),
    "latency_us": Column("us", False, ("latency", "µs", 1.0)),
    "min_latency_us": Column("us", False),
    "max_latency_us": Column("us", False),
    "iterations": Column(None),
    "bandwidth_MBps": Column("MB/s", True, ("bandwidth", "GB/s", 1e-3)),
    "message_rate": Column("msg/s", True, ("message rate", "messages/s", 1.0)),
    "validation": Column(None),
    # the non-blocking collectives (osu_i*): the whole call, the compute overlapped with it, the parts of it
    "overall_us": Column("us", False, ("overall latency", "µs", 1.0)),
    "compute_us": Column("us"),
    "coll_init_us": Column("us"),
    "mpi_test_us": Column("us"),
    "mpi_wait_us": Column("us"),
    "pure_comm_us": Column("us", False, ("communication latency", "µs", 1.0)),
    "min_comm_us": Column("us"),
    "max_comm_us": Column("us"),
    "overlap_pct": Column("%", True, ("overlap", "%", 1.0)),
    # 6.1+ -D (derived datatypes): the bytes one message carries
    "transmit_size": Column("B"),
    # osu_init, osu_hello: the processes that started (hello's only figure: a reference may ask for all of them),
    # and how long MPI_Init took them
    "processes": Column(None, True, ("processes started", "", 1.0)),
    "init_min_ms": Column("ms"),
    "init_max_ms": Column("ms"),
    "init_avg_ms": Column("ms", False, ("MPI_Init time", "ms", 1.0)),
    # 7.4+ --tail-lat: one column per percentile asked for (-z P50,P99)
    **{f"p{p}_tail_latency_us": Column("us") for p in TAIL_PERCENTILES},
    **{f"p{p}_tail_bandwidth_MBps": Column("MB/s") for p in TAIL_PERCENTILES},
}
OSU_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # OSU prints %.2f: no sign, no exponent

OSU_TITLE = re.compile(r"^# (?P<api>OSU (?:MPI(?:_[A-Za-z_]+?)?|NCCL|RCCL))"
                       r"(?:-(?P<dev>CUDA MANAGED|CUDA|ROCM|OPENACC|SYCL|MANAGED))?"
                       r"(?P<name> .+? Test)(?: v(?P<ver>\d[\w.]*))?$")
# 7.3+ xccl benchmarks: each rank's first line; 7.4+ point-to-point xccl runs print no title, only these
XCCL_USING = re.compile(r"^#Using (NCCL|RCCL)$")

# header column text (lower case) -> canonical name; 5.x and 7.x write the same columns
OSU_COLUMNS = {
    "size": "size",
    "latency (us)": "latency_us",
    "avg latency(us)": "latency_us",
    "min latency(us)": "min_latency_us",
    "max latency(us)": "max_latency_us",
    "iterations": "iterations",
    "bandwidth (mb/s)": "bandwidth_MBps",
    "mb/s": "bandwidth_MBps",
    "messages/s": "message_rate",
    "validation": "validation",
    "overall(us)": "overall_us",
    "compute(us)": "compute_us",
    "coll. init(us)": "coll_init_us",
    "mpi_test(us)": "mpi_test_us",
    "mpi_wait(us)": "mpi_wait_us",
    "pure comm.(us)": "pure_comm_us",
    "min comm.(us)": "min_comm_us",
    "max comm.(us)": "max_comm_us",
    "overlap(%)": "overlap_pct",
    "transmit size": "transmit_size",
    **{f"p{p} tail lat(us)": f"p{p}_tail_latency_us" for p in TAIL_PERCENTILES},
    **{f"p{p} tail bw(mb/s)": f"p{p}_tail_bandwidth_MBps" for p in TAIL_PERCENTILES},
}
HEADER_NAMES = sorted(OSU_COLUMNS, key=len, reverse=True)  # the longest first: `mb/s` is in `bandwidth (mb/s)`
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


def title_match(line: str) -> tuple[Benchmark, re.Match] | None:
    """The benchmark an OSU title line names; None when the line is no OSU title."""
    m = OSU_TITLE.match(line)
    if not m:
        return None
    bench = BY_TITLE.get(m.group("api") + m.group("name"))
    if bench is None:
        raise UnknownFormatError("unknown OSU benchmark title", line, 0)
    if bench.name in NCCL_TO_XCCL and _release(m.group("ver")) >= (7, 3):
        bench = BENCHMARKS[NCCL_TO_XCCL[bench.name]]  # 7.3 renamed c/nccl osu_nccl_* to c/xccl osu_xccl_*
    return bench, m


def _osu_header(line: str) -> list[str] | None:
    """The columns a header line names, each a known column name (`# Size  Latency (us)`; 5.x-6.x osu_ibarrier's
    has no `#`; 7.4's tail columns may stand one space after the one before: `Bandwidth (MB/s) P50 Tail BW(MB/s)`)."""
    rest, cols = line.removeprefix("#").strip().lower(), []
    while rest:
        name = next((n for n in HEADER_NAMES if rest.startswith(n) and rest[len(n):len(n) + 1] in ("", " ")), None)
        if name is None:
            return None
        cols.append(OSU_COLUMNS[name])
        rest = rest[len(name):].lstrip()
    return cols


def _meta(patterns: list, line: str) -> dict[str, Any] | None:
    for pattern, meta in patterns:
        if (m := pattern.match(line)):
            return meta(m)
    return None


def _untitled(line: str, lineno: int, prelude: dict[str, Any]) -> Sweep | None:
    """The table a header starts where no title came: a 7.4+ xccl point-to-point run (after `#Using NCCL`)
    prints none; the header tells latency from bandwidth, and bw from bibw nothing does."""
    cols = _osu_header(line) if "xccl" in prelude else None
    if cols is None:
        return None
    if "latency_us" not in cols:
        raise UnknownFormatError("an xccl bandwidth table without a title: osu_xccl_bw and osu_xccl_bibw print the "
                                 "same; run one of them by name", line, lineno)
    return Sweep(TOOL.name, "osu_xccl_latency", "", None, "ROCM" if prelude["xccl"] == "RCCL" else "CUDA", [],
                 meta=dict(prelude), title_line=(lineno, line))


def _osu_tables(t: Text) -> list[Sweep]:
    sweeps: list[Sweep] = []
    cur: Sweep | None = None
    prelude: dict[str, Any] = {}  # lines that belong to the table whose title follows
    for lineno, line in t.lines:
        try:
            titled = title_match(line)
        except UnknownFormatError as e:
            raise UnknownFormatError(e.message, line, lineno) from None
        if titled:
            bench, m = titled
            if cur and not cur.columns and not cur.rows and line == cur.title_line[1]:
                continue  # 6.2 and 7.2 osu_mbw_mr print their title twice
            cur = Sweep(TOOL.name, bench.name, line[2:], m.group("ver"), m.group("dev"), [], meta=prelude,
                        title_line=(lineno, line))
            prelude = {}
            sweeps.append(cur)
            continue
        if (meta := _meta(OSU_PRELUDE, line)) is not None:
            if cur is None or cur.rows:
                prelude.update(meta)  # the next table's
            else:
                cur.meta.update(meta)  # 5.7 osu_latency_mp: after its title
            continue
        if cur is None or cur.rows and prelude:
            if "xccl" in prelude and (meta := _meta(OSU_META, line)) is not None:
                prelude.update(meta)  # 7.4+ xccl point-to-point: `# Send Buffer on ...` before the header
                continue
            if (untitled := _untitled(line, lineno, prelude)) is None:
                raise UnknownFormatError("text before any OSU title" if cur is None else
                                         "text between two OSU tables", line, lineno)
            cur, prelude = untitled, {}
            sweeps.append(cur)
        if VALIDATION_ERROR.match(line):
            cur.error_lines.append((lineno, line))
            continue
        if cur.benchmark in STARTUP_COLUMNS and not line.startswith("#"):
            mm = (INIT_LINE if cur.benchmark == "osu_init" else HELLO_LINE).match(line)
            if not mm or cur.rows:
                raise UnknownFormatError(f"{cur.benchmark} prints one line after its title, not this", line, lineno)
            cur.columns = ["size", *STARTUP_COLUMNS[cur.benchmark]]
            cur.rows.append(dict(zip(cur.columns, [0, *(int(v) for v in mm.groups())])))
            cur.row_lines.append((lineno, line))
            continue
        if line.startswith("#"):
            for pattern, meta in OSU_META:
                mm = pattern.match(line)
                if mm:
                    if cur.rows and pattern is OSU_META[0][0]:
                        # 7.x -T all: each datatype is a table of its own, with its own header
                        cur = Sweep(TOOL.name, cur.benchmark, cur.title, cur.version, cur.device, [],
                                    meta=dict(cur.meta), title_line=cur.title_line)
                        sweeps.append(cur)
                    cur.meta.update(meta(mm))
                    break
            else:
                _header(sweeps, cur, line, lineno)
            continue
        if not cur.columns and not cur.rows and _osu_header(line):
            _header(sweeps, cur, line, lineno)  # 5.x-6.x osu_ibarrier: a header without `#`
            continue
        if not cur.columns:
            raise UnknownFormatError("data row before the OSU column header", line, lineno)
        _row(t, cur, line, lineno)
    if prelude:
        raise TruncatedError("the output ends before the OSU title these lines announce", *t.lines[-1][::-1])
    for s in sweeps:
        if not s.columns:
            raise TruncatedError(f"{s.benchmark}: the output ends before the column header", *s.title_line[::-1])
        if not s.rows:
            raise TruncatedError(f"{s.benchmark}: the output ends before the first row", *s.title_line[::-1])
    return sweeps


def _header(sweeps: list[Sweep], cur: Sweep, line: str, lineno: int) -> None:
    cols = _osu_header(line)
    if cols is None:
        raise UnknownFormatError("unknown OSU header line or column", line, lineno)
    if cur.benchmark in STARTUP_COLUMNS:
        raise UnknownFormatError(f"{cur.benchmark} prints one line, no table", line, lineno)
    if cur.columns and not cur.rows:  # 7.x -T all: the next datatype's header
        raise TruncatedError(f"{cur.benchmark}: a table ends before its first row", line, lineno)
    if cur.columns:
        raise UnknownFormatError("second column header in one OSU table", line, lineno)
    if (cols[0] == "size") != BENCHMARKS[cur.benchmark].sized:
        raise UnknownFormatError(f"{cur.benchmark} has {'a' if cols[0] != 'size' else 'no'} size "
                                 f"column", line, lineno)
    # barrier has no size column: its one row is size 0
    cur.columns = cols if cols[0] == "size" else ["size", *cols]
    first = next(s for s in sweeps if s.title_line == cur.title_line)
    if first is not cur and BENCHMARKS[cur.benchmark].directory == "pt2pt":
        # 7.2 -T all: a point-to-point test heads its second and later datatypes with the
        # collectives' header (`# Size  Avg Latency(us)`, for osu_bw and osu_mbw_mr too);
        # their rows are the first table's columns
        cur.columns = first.columns


def _row(t: Text, cur: Sweep, line: str, lineno: int) -> None:
    fields = line.split()
    sized = BENCHMARKS[cur.benchmark].sized
    want = len(cur.columns) - (0 if sized else 1)
    if len(fields) != want:
        raise cut_row(t, lineno, line, f"row has {len(fields)} fields, the header {want}", want)
    if not fields[0][0].isdigit():  # a row starts with its size (barrier: its latency)
        raise UnknownFormatError("not a row of the table: it does not start with a number", line, lineno)
    values = fields if sized else ["0", *fields]
    row: dict[str, Any] = {}
    for col, val in zip(cur.columns, values):
        if col in COUNTS:
            row[col] = count(val, line, lineno)
        elif col == "validation":
            if val not in OSU_VALIDATION:
                raise cut_row(t, lineno, line, f"validation is {val!r}, not {' or '.join(OSU_VALIDATION)}")
            row[col] = OSU_VALIDATION[val]
        else:
            row[col] = number(val, line, lineno, OSU_NUMBER)
    if cur.rows:
        prev = cur.rows[-1]["size"]
        if not sized or row["size"] != (prev * 2 if prev else 1):
            raise UnknownFormatError(f"size {row['size']} after {prev}: OSU doubles the size, so rows are "
                                     f"missing or out of order", line, lineno)
    cur.rows.append(row)
    cur.row_lines.append((lineno, line))


def parse_osu(text: str) -> list[Sweep]:
    """Every OSU table in `text` (a job script may run several), in order."""
    t = own_lines(text)
    try:
        sweeps = _osu_tables(t)
    except BadNumberError as e:
        raise cut_number(t, e) from None
    check_last_line(t, sweeps)
    assign_warnings(sweeps, t)
    if t.mem_limit:
        for s in sweeps:
            s.meta["mem_limit"] = t.mem_limit
    return sweeps


def title(line: str) -> Benchmark | None:
    """The benchmark an OSU title names; its usage line instead of a table is an error of its own. A 7.3+
    xccl run starts with `#Using NCCL`: the title (a collective's) or the header (point-to-point) follows."""
    titled = title_match(line)
    if titled:
        return titled[0]
    if XCCL_USING.match(line):
        return BENCHMARKS["osu_xccl_latency"]
    if line.startswith(("# Number of Sender threads:", "# Number of forked processes in sender:")):
        return BENCHMARKS["osu_latency_mt" if "threads" in line else "osu_latency_mp"]  # their lines before the title
    if OSU_USAGE.match(line):
        raise UnknownFormatError("OSU printed its usage: it does not take these options", line, 0)
    return None


def _release(version: str | None) -> tuple[int, ...]:
    """(major, minor, ...) of a printed version (`7.5`, `5.3.2`, `7.0-lrbison2`); () when there is none."""
    return tuple(int(n) for n in re.findall(r"\d+", (version or "").split("-")[0]))


#: the first release of each generation of default sweeps (docs/osu-versions.md): 5.3.x loop one-sided
#: latency from 0 B and take no -m for point-to-point; 5.4 - 7.0 count bytes (reductions floats); 7.1 loops
#: over datatypes (`# Datatype:`, sizes below one element skipped: latency from 1 B, cas/fop one element);
#: 7.5 reductions default to MPI_INT and -M is gone
GENERATIONS = ("5.3", "5.4", "7.1", "7.5")
LAST_KNOWN = (7, 5)


def family(version: str | None) -> str:
    """The generation a printed version belongs to, the key of Benchmark.default_sizes; "" where no version
    is printed (7.4+ xccl point-to-point), the version itself where its defaults are not known (before 5.3,
    after 7.5.x)."""
    release = _release(version)
    if not release:
        return ""
    if release[:2] > LAST_KNOWN:
        return version or ""
    for generation in reversed(GENERATIONS):
        if release >= _release(generation):
            return generation
    return version or ""


def first_size(bench: Benchmark, sweep: Sweep, lo: int) -> int:
    """The first size a sweep from `lo` prints, as OSU's loops go: a table without a `# Datatype:` line counts
    bytes (from 0 up), its reductions whole floats (`lo / 4`, at least one: 5.x - 7.0, xccl); with one (7.1+),
    the sizes that hold no whole element of that datatype are skipped."""
    datatype = sweep.meta.get("datatype")
    if datatype and datatype not in DATATYPE_BYTES:
        raise UnknownFormatError(f"{bench.name}: datatype {datatype} of unknown size", *sweep.title_line[::-1])
    if not datatype and bench.elements_v5 > 1:
        return max(1, lo // bench.elements_v5) * bench.elements_v5
    element = DATATYPE_BYTES.get(datatype, 0)
    size = lo
    while size < element:
        size = size * 2 if size else 1
    return size


def last_size(bench: Benchmark, sweep: Sweep, args: list[str], ranks: int | None, hi: int) -> int:
    """OSU's check_mem_limit (5.3 - 7.4): a collective that gathers from every rank stops at -M (512 MiB) / ranks,
    silently until 6.1, with a warning from 6.2 (and its size from 7.0); 7.5 has no limit."""
    if not bench.mem_limit_per_rank or family(sweep.version) == "7.5":
        return hi
    if ranks:
        hi = min(hi, bench.mem_limit(args) // ranks)
    if sweep.meta.get("mem_limit"):
        hi = min(hi, sweep.meta["mem_limit"])
    return hi


# ------------------------------------------------------------------------------------ launching

def program(b: Benchmark, p: Program) -> list[str]:
    exe = f"./{b.directory}/{b.name}" if p.container else f"{p.home}/{b.directory}/{b.name}"  # the image's WORKDIR
    if p.memory == "device":
        return [exe, *p.args, *p.size_args, *p.device_args.get(b.directory, b.device_args)]
    return [exe, *p.args, *p.size_args]


def native(binaries: Any) -> str:
    """libexec/osu-micro-benchmarks/mpi of the given install, else of the local env's (installed there by
    the pinned Spack where `binaries.build` allows)."""
    if binaries.osu_prefix is None:  # looked up, and built if need be, once per run ("": there is none)
        binaries.osu_prefix = _from_spack(binaries)
    if not binaries.osu_prefix:
        raise BinaryNotFoundError(f"no OSU micro-benchmarks here: {binaries.missing.get(TOOL.name, OSU_HINT)}")
    mpi = Path(binaries.osu_prefix) / "libexec" / "osu-micro-benchmarks" / "mpi"
    if not (mpi / "pt2pt" / "osu_latency").is_file():
        raise BinaryNotFoundError(f"{binaries.osu_prefix} is not an OSU install (no {mpi}/pt2pt/osu_latency): "
                                  f"{OSU_HINT}")
    return str(mpi)


def _from_spack(binaries: Any) -> str:
    """The local env's OSU: installed already, else installed now by the pinned Spack."""
    exe = find_spack()
    found = location(exe, "osu-micro-benchmarks") if exe else None
    if found or not binaries.build:
        return found or ""
    try:
        return str(install("osu-micro-benchmarks", binaries.build_dir / "spack-install.log", binaries.say))
    except SpackInstallError as e:
        binaries.missing[TOOL.name] = f"{str(e).rstrip('.')}; {OSU_FIX}"
        return ""


TOOL = Tool("osu", "OSU", "mpi", "mpi", COLUMNS, "$OSU_MPI", program, parse_osu, title, native=native,
            planned=native, family=family, zero_lo_is_default=True, first_size=first_size,
            last_size=last_size)

# ----------------------------------------------------------------------------------- benchmarks

SIZES = SizeFlags(range_flags=("-m", "--message-size"),
                  plain="OSU reads -m with atoll, so 1M would mean 1 byte")
PT2PT_DEVICE = ("-d", "cuda", "D", "D")
COLL_DEVICE = ("-d", "cuda")
# Default sweeps per generation (family), from each release's source (docs/osu-versions.md): point-to-point
# and one-sided end at 4 MiB (MAX_MESSAGE_SIZE), collectives at 1 MiB (MAX_MSG_SIZE_COLL); point-to-point
# latency starts at 0 B until 7.0, 1 B from 7.1 (0 B holds no element); 5.3.x one-sided latency at 0 B;
# reductions at one float (4 B) until 7.0, one element from 7.1 (MPI_CHAR; 7.5: MPI_INT, the `# Datatype:`
# line says which); cas and fop print one row, 8 B until 7.0, one element from 7.1. "": the 7.4+ xccl
# point-to-point runs, which print no title and so no version.
M4, M1 = 4194304, 1048576
LAT_SIZES = (("5.3", (0, M4)), ("5.4", (0, M4)), ("7.1", (1, M4)), ("7.5", (1, M4)))
PT2PT_SIZES = (("5.3", (1, M4)), ("5.4", (1, M4)), ("7.1", (1, M4)), ("7.5", (1, M4)))
ONE_SIDED_LAT_SIZES = (("5.3", (0, M4)), ("5.4", (1, M4)), ("7.1", (1, M4)), ("7.5", (1, M4)))
COLL_SIZES = (("5.3", (1, M1)), ("5.4", (1, M1)), ("7.1", (1, M1)), ("7.5", (1, M1)))
REDUCE_SIZES = (("5.3", (4, M1)), ("5.4", (4, M1)), ("7.1", (1, M1)), ("7.5", (1, M1)))
ATOMIC_SIZES = (("5.3", (8, 8)), ("5.4", (8, 8)), ("7.1", (1, 1)), ("7.5", (1, 1)))
NO_SIZES = (("5.3", (0, 0)), ("5.4", (0, 0)), ("7.1", (0, 0)), ("7.5", (0, 0)))
# xccl (NCCL/RCCL) loops count bytes (latency from 0 B) and floats (reductions) in every release
XCCL_LAT_SIZES = (*((g, (0, M4)) for g in GENERATIONS), ("", (0, M4)))
XCCL_PT2PT_SIZES = tuple((g, (1, M4)) for g in GENERATIONS)
XCCL_COLL_SIZES = tuple((g, (1, M1)) for g in GENERATIONS)
XCCL_REDUCE_SIZES = tuple((g, (4, M1)) for g in GENERATIONS)

#: bytes of the datatypes OSU 7.x names on its `# Datatype:` line (-T mpi_char, mpi_int, mpi_float)
DATATYPE_BYTES = {"MPI_CHAR": 1, "MPI_SIGNED_CHAR": 1, "MPI_INT": 4, "MPI_FLOAT": 4, "MPI_DOUBLE": 8}
#: osu_init's and osu_hello's one line, as columns
STARTUP_COLUMNS = {"osu_init": ["processes", "init_min_ms", "init_max_ms", "init_avg_ms"],
                   "osu_hello": ["processes"]}


def _osu(name: str, title: str, directory: str, metric: str = "latency_us", **kw) -> Benchmark:
    device = COLL_DEVICE if directory == "collective" else PT2PT_DEVICE
    defaults = COLL_SIZES if directory == "collective" else PT2PT_SIZES
    return Benchmark(name, TOOL, (title,), metric, SIZES, kw.pop("default_sizes", defaults), directory,
                     kw.pop("device_args", device), **kw)


def _nbc(name: str, title: str, **kw) -> Benchmark:
    """A non-blocking collective (osu_i*): its latency is the Overall column."""
    return _osu(name, f"OSU MPI Non-{title} Latency Test", "collective", "overall_us", **kw)


def _xccl(name: str, title: str, directory: str, metric: str = "latency_us", **kw) -> Benchmark:
    """An xccl benchmark of 7.3+ (osu_xccl_*, titled OSU NCCL or OSU RCCL), or of 5.9-7.2 (osu_nccl_*)."""
    apis = ("OSU NCCL", "OSU RCCL") if name.startswith("osu_xccl") else ("OSU NCCL",)
    return Benchmark(name, TOOL, tuple(f"{api} {title} Test" for api in apis), metric, SIZES, kw.pop("default_sizes"),
                     directory, (), **kw)


XCCL = [("latency", "Latency", "pt2pt", "latency_us", XCCL_LAT_SIZES),
        ("bw", "Bandwidth", "pt2pt", "bandwidth_MBps", XCCL_PT2PT_SIZES),
        ("bibw", "Bi-Directional Bandwidth", "pt2pt", "bandwidth_MBps", XCCL_PT2PT_SIZES),
        ("allreduce", "Allreduce Latency", "collective", "latency_us", XCCL_REDUCE_SIZES),
        ("reduce", "Reduce Latency", "collective", "latency_us", XCCL_REDUCE_SIZES),
        ("reduce_scatter", "Reduce_scatter Latency", "collective", "latency_us", XCCL_REDUCE_SIZES),
        ("allgather", "Allgather Latency", "collective", "latency_us", XCCL_COLL_SIZES),
        ("alltoall", "All-to-All Personalized Exchange Latency", "collective", "latency_us", XCCL_COLL_SIZES),
        ("bcast", "Broadcast Latency", "collective", "latency_us", XCCL_COLL_SIZES)]

BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in [
    _osu("osu_latency", "OSU MPI Latency Test", "pt2pt", default_sizes=LAT_SIZES),
    _osu("osu_bw", "OSU MPI Bandwidth Test", "pt2pt", "bandwidth_MBps", line_rate_factor=1),
    _osu("osu_bibw", "OSU MPI Bi-Directional Bandwidth Test", "pt2pt", "bandwidth_MBps", line_rate_factor=2),
    _osu("osu_mbw_mr", "OSU MPI Multiple Bandwidth / Message Rate Test", "pt2pt", "bandwidth_MBps"),
    _osu("osu_multi_lat", "OSU MPI Multi Latency Test", "pt2pt", default_sizes=LAT_SIZES),
    _osu("osu_latency_mt", "OSU MPI Multi-threaded Latency Test", "pt2pt", default_sizes=LAT_SIZES),
    _osu("osu_latency_mp", "OSU MPI Multi-process Latency Test", "pt2pt", default_sizes=LAT_SIZES),
    _osu("osu_put_latency", "OSU MPI_Put Latency Test", "one-sided", default_sizes=ONE_SIDED_LAT_SIZES),
    _osu("osu_get_latency", "OSU MPI_Get latency Test", "one-sided", default_sizes=ONE_SIDED_LAT_SIZES),
    _osu("osu_put_bw", "OSU MPI_Put Bandwidth Test", "one-sided", "bandwidth_MBps"),
    _osu("osu_get_bw", "OSU MPI_Get Bandwidth Test", "one-sided", "bandwidth_MBps"),
    _osu("osu_put_bibw", "OSU MPI_Put Bi-directional Bandwidth Test", "one-sided", "bandwidth_MBps"),
    _osu("osu_acc_latency", "OSU MPI_Accumulate latency Test", "one-sided", default_sizes=ONE_SIDED_LAT_SIZES),
    _osu("osu_get_acc_latency", "OSU MPI_Get_accumulate latency Test", "one-sided",
         default_sizes=ONE_SIDED_LAT_SIZES),
    _osu("osu_fop_latency", "OSU MPI_Fetch_and_op latency Test", "one-sided", default_sizes=ATOMIC_SIZES),
    _osu("osu_cas_latency", "OSU MPI_Compare_and_swap latency Test", "one-sided", default_sizes=ATOMIC_SIZES),
    _osu("osu_allreduce", "OSU MPI Allreduce Latency Test", "collective", default_sizes=REDUCE_SIZES, elements_v5=4),
    _osu("osu_alltoall", "OSU MPI All-to-All Personalized Exchange Latency Test", "collective",
         mem_limit_per_rank=True),
    _osu("osu_alltoallv", "OSU MPI All-to-Allv Personalized Exchange Latency Test", "collective",
         mem_limit_per_rank=True),
    _osu("osu_alltoallw", "OSU MPI All-to-Allw Personalized Exchange Latency Test", "collective",
         mem_limit_per_rank=True),
    _osu("osu_allgather", "OSU MPI Allgather Latency Test", "collective", mem_limit_per_rank=True),
    _osu("osu_allgatherv", "OSU MPI Allgatherv Latency Test", "collective", mem_limit_per_rank=True),
    _osu("osu_bcast", "OSU MPI Broadcast Latency Test", "collective"),
    _osu("osu_reduce", "OSU MPI Reduce Latency Test", "collective", default_sizes=REDUCE_SIZES, elements_v5=4),
    _osu("osu_reduce_scatter", "OSU MPI Reduce_scatter Latency Test", "collective", default_sizes=REDUCE_SIZES,
         elements_v5=4),
    _osu("osu_gather", "OSU MPI Gather Latency Test", "collective", mem_limit_per_rank=True),
    _osu("osu_gatherv", "OSU MPI Gatherv Latency Test", "collective", mem_limit_per_rank=True),
    _osu("osu_scatter", "OSU MPI Scatter Latency Test", "collective", mem_limit_per_rank=True),
    _osu("osu_scatterv", "OSU MPI Scatterv Latency Test", "collective", mem_limit_per_rank=True),
    _osu("osu_barrier", "OSU MPI Barrier Latency Test", "collective", default_sizes=NO_SIZES, sized=False),
    # non-blocking collectives; 5.3's osu_ialltoallw is titled as osu_ialltoallv and reads as it
    _nbc("osu_iallgather", "blocking Allgather", mem_limit_per_rank=True),
    _nbc("osu_iallgatherv", "blocking Allgatherv", mem_limit_per_rank=True),
    _nbc("osu_ialltoall", "blocking All-to-All", mem_limit_per_rank=True),
    _nbc("osu_ialltoallv", "blocking All-to-Allv Personalized Exchange", mem_limit_per_rank=True),
    _nbc("osu_ialltoallw", "blocking All-to-Allw Personalized Exchange", mem_limit_per_rank=True),
    _nbc("osu_ibcast", "Blocking Broadcast"),
    _nbc("osu_igather", "blocking Gather", mem_limit_per_rank=True),
    _nbc("osu_igatherv", "blocking Gatherv", mem_limit_per_rank=True),
    _nbc("osu_iscatter", "blocking Scatter", mem_limit_per_rank=True),
    _nbc("osu_iscatterv", "blocking Scatterv", mem_limit_per_rank=True),
    _nbc("osu_iallreduce", "blocking Allreduce", default_sizes=REDUCE_SIZES, elements_v5=4),
    _nbc("osu_ireduce", "blocking Reduce", default_sizes=REDUCE_SIZES, elements_v5=4),
    _nbc("osu_ireduce_scatter", "blocking Reduce_scatter", default_sizes=REDUCE_SIZES, elements_v5=4),
    _nbc("osu_ibarrier", "blocking Barrier", default_sizes=NO_SIZES, sized=False),
    # startup: one line, no table
    _osu("osu_init", "OSU MPI Init Test", "startup", "init_avg_ms", default_sizes=NO_SIZES, sized=False,
         device_args=()),
    _osu("osu_hello", "OSU MPI Hello World Test", "startup", "processes", default_sizes=NO_SIZES, sized=False,
         device_args=()),
    *(_xccl(f"osu_{api}_{name}", title, f"../{api}/{directory}", metric, default_sizes=sizes)
      for api in ("xccl", "nccl") for name, title, directory, metric, sizes in XCCL),
]}
#: an output's title, less device and version -> its benchmark
BY_TITLE: dict[str, Benchmark] = {t: b for b in BENCHMARKS.values() for t in b.titles}
#: 5.9 - 7.2 osu_nccl_* -> their 7.3+ names: the same titles
NCCL_TO_XCCL = {f"osu_nccl_{name}": f"osu_xccl_{name}" for name, *_ in XCCL}
