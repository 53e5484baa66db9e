"""OSU micro-benchmarks (5.x-7.5): the MPI layer's benchmarks, one MPI program of N ranks.

The title line (`# OSU MPI Bandwidth Test v7.2`, `# OSU MPI-CUDA ...` with device buffers) names the
benchmark and its version, whose major number picks the default sizes learnt from the recorded real
outputs (tests/data/osu, the seeds); the header names the columns. The binaries live under
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

COLUMNS = {
    "size": Column("B"),
    "latency_us": Column("us", False, ("latency", "µs", 1.0)),
    "min_latency_us": Column("us", False),
    "max_latency_us": Column("us", False),
    "iterations": Column(None),
    "bandwidth_MBps": Column("MB/s", True, ("bandwidth", "GB/s", 1e-3)),
    "message_rate": Column("msg/s", True, ("message rate", "messages/s", 1.0)),
    "validation": Column(None),
}
OSU_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # OSU prints %.2f: no sign, no exponent

OSU_TITLE = re.compile(r"^# (?P<api>OSU MPI(?:_[A-Za-z_]+?)?)(?:-(?P<dev>CUDA|ROCM|OPENACC|SYCL))?"
                       r"(?P<name> .+? Test)(?: v(?P<ver>\d[\w.]*))?$")

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
}

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
]


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
    return bench, m


def _osu_header(line: str) -> list[str] | None:
    names = re.split(r"\s{2,}", line[1:].strip())
    if all(n.lower() in OSU_COLUMNS for n in names):
        return [OSU_COLUMNS[n.lower()] for n in names]
    return None


def _osu_tables(t: Text) -> list[Sweep]:
    sweeps: list[Sweep] = []
    cur: Sweep | None = None
    for lineno, line in t.lines:
        try:
            titled = title_match(line)
        except UnknownFormatError as e:
            raise UnknownFormatError(e.message, line, lineno) from None
        if titled:
            bench, m = titled
            if cur and not cur.columns and not cur.meta and line == cur.title_line[1]:
                continue  # 7.2 osu_mbw_mr prints its title twice
            cur = Sweep(TOOL.name, bench.name, line[2:], m.group("ver"), m.group("dev"), [],
                        title_line=(lineno, line))
            sweeps.append(cur)
            continue
        if cur is None:
            raise UnknownFormatError("text before any OSU title", line, lineno)
        if VALIDATION_ERROR.match(line):
            cur.error_lines.append((lineno, line))
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
                cols = _osu_header(line)
                if cols is None:
                    raise UnknownFormatError("unknown OSU header line or column", line, lineno)
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
            continue
        if not cur.columns:
            raise UnknownFormatError("data row before the OSU column header", line, lineno)
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
            if col in ("size", "iterations"):
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
    for s in sweeps:
        if not s.columns:
            raise TruncatedError(f"{s.benchmark}: the output ends before the column header", *s.title_line[::-1])
        if not s.rows:
            raise TruncatedError(f"{s.benchmark}: the output ends before the first row", *s.title_line[::-1])
    return sweeps


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
    """The benchmark an OSU title names; its usage line instead of a table is an error of its own."""
    titled = title_match(line)
    if titled:
        return titled[0]
    if OSU_USAGE.match(line):
        raise UnknownFormatError("OSU printed its usage: it does not take these options", line, 0)
    return None


def family(version: str | None) -> str:
    """5.x and 7.x sweep different default sizes: the major version picks them."""
    return (version or "").split(".")[0]


def first_size(bench: Benchmark, sweep: Sweep, lo: int) -> int:
    """The first size a sweep from `lo` prints, as OSU's loops go: 5.x reductions round down to whole
    floats; 7.x skips the sizes that hold no whole element of the `# Datatype:` line's type (5.x prints
    none, and counts bytes from 0 up)."""
    datatype = sweep.meta.get("datatype")
    if datatype and datatype not in DATATYPE_BYTES:
        raise UnknownFormatError(f"{bench.name}: datatype {datatype} of unknown size", *sweep.title_line[::-1])
    element = DATATYPE_BYTES.get(datatype, 0)
    if family(sweep.version) == "5" and bench.elements_v5 > 1:
        return max(1, lo // bench.elements_v5) * bench.elements_v5
    size = lo
    while size < element:
        size = size * 2 if size else 1
    return size


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
            planned=native, family=family, zero_lo_is_default=True, first_size=first_size)

# ----------------------------------------------------------------------------------- benchmarks

SIZES = SizeFlags(range_flags=("-m", "--message-size"),
                  plain="OSU reads -m with atoll, so 1M would mean 1 byte")
PT2PT_DEVICE = ("-d", "cuda", "D", "D")
COLL_DEVICE = ("-d", "cuda")
# Learnt from OSU 5.7 and 7.2 runs (tests/data/osu) and the 5.3.2 / 7.5 seeds: point-to-point and
# one-sided sweeps end at 4 MiB, collectives at 1 MiB; 5.x latency starts at 0 B, 5.x allreduce and
# reduce at 4 B (MPI_FLOAT); cas and fop print one row (7.x: 1 B, 5.x: 8 B)
LAT_SIZES = (("5", (0, 4194304)), ("7", (1, 4194304)))
PT2PT_SIZES = (("5", (1, 4194304)), ("7", (1, 4194304)))
COLL_SIZES = (("5", (1, 1048576)), ("7", (1, 1048576)))
REDUCE_SIZES = (("5", (4, 1048576)), ("7", (1, 1048576)))
ATOMIC_SIZES = (("5", (8, 8)), ("7", (1, 1)))
NO_SIZES = (("5", (0, 0)), ("7", (0, 0)))

#: bytes of the datatypes OSU 7.x names on its `# Datatype:` line (-T mpi_char, mpi_int, mpi_float)
DATATYPE_BYTES = {"MPI_CHAR": 1, "MPI_SIGNED_CHAR": 1, "MPI_INT": 4, "MPI_FLOAT": 4, "MPI_DOUBLE": 8}


def _osu(name: str, title: str, directory: str, metric: str = "latency_us", **kw) -> Benchmark:
    device = COLL_DEVICE if directory == "collective" else PT2PT_DEVICE
    defaults = COLL_SIZES if directory == "collective" else PT2PT_SIZES
    return Benchmark(name, TOOL, (title,), metric, SIZES, kw.pop("default_sizes", defaults), directory, device, **kw)


BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in [
    _osu("osu_latency", "OSU MPI Latency Test", "pt2pt", default_sizes=LAT_SIZES),
    _osu("osu_bw", "OSU MPI Bandwidth Test", "pt2pt", "bandwidth_MBps", line_rate_factor=1),
    _osu("osu_bibw", "OSU MPI Bi-Directional Bandwidth Test", "pt2pt", "bandwidth_MBps", line_rate_factor=2),
    _osu("osu_mbw_mr", "OSU MPI Multiple Bandwidth / Message Rate Test", "pt2pt", "bandwidth_MBps"),
    _osu("osu_multi_lat", "OSU MPI Multi Latency Test", "pt2pt", default_sizes=LAT_SIZES),
    _osu("osu_put_latency", "OSU MPI_Put Latency Test", "one-sided"),
    _osu("osu_get_latency", "OSU MPI_Get latency Test", "one-sided"),
    _osu("osu_put_bw", "OSU MPI_Put Bandwidth Test", "one-sided", "bandwidth_MBps"),
    _osu("osu_get_bw", "OSU MPI_Get Bandwidth Test", "one-sided", "bandwidth_MBps"),
    _osu("osu_put_bibw", "OSU MPI_Put Bi-directional Bandwidth Test", "one-sided", "bandwidth_MBps"),
    _osu("osu_acc_latency", "OSU MPI_Accumulate latency Test", "one-sided"),
    _osu("osu_get_acc_latency", "OSU MPI_Get_accumulate latency Test", "one-sided"),
    _osu("osu_fop_latency", "OSU MPI_Fetch_and_op latency Test", "one-sided", default_sizes=ATOMIC_SIZES),
    _osu("osu_cas_latency", "OSU MPI_Compare_and_swap latency Test", "one-sided", default_sizes=ATOMIC_SIZES),
    _osu("osu_allreduce", "OSU MPI Allreduce Latency Test", "collective", default_sizes=REDUCE_SIZES, elements_v5=4),
    _osu("osu_alltoall", "OSU MPI All-to-All Personalized Exchange Latency Test", "collective",
         mem_limit_per_rank=True),
    _osu("osu_alltoallv", "OSU MPI All-to-Allv Personalized Exchange Latency Test", "collective",
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
]}
#: an output's title, less device and version -> its benchmark
BY_TITLE: dict[str, Benchmark] = {t: b for b in BENCHMARKS.values() for t in b.titles}
