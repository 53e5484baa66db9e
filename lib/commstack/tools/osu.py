"""OSU micro-benchmarks (5.x-7.5): the MPI layer's benchmarks, one MPI program of N ranks. The title line
names the benchmark and its version, whose generation (`family`) picks the default sizes (docs/osu-versions.md);
the header names the columns. Where the binaries come from: commstack.tools.osu_install (docs/harness.md);
in the osu-mb image under its WORKDIR."""

from __future__ import annotations

import re
from typing import Any

from commstack.errors import TruncatedError, UnknownFormatError
from commstack.tools.lines import (TITLE_MISSING, VALIDATION_ERROR, Note, Quoted, Sweep, Text, count, cut_row, number,
                                   read_output)
from commstack.tools.base import Benchmark, InSpec, Program, SizeFlags, Tool
from commstack.tools.osu_format import (ATOMIC_SIZES, COLL_SIZES, COLUMNS, COUNTS, DATATYPE_BYTES, HELLO_LINE,
                                        INIT_LINE, LAT_SIZES, ONE_SIDED_LAT_SIZES, OSU_META, OSU_NUMBER,
                                        OSU_PRELUDE, OSU_TITLE, OSU_USAGE, OSU_VALIDATION, PT2PT_SIZES, REDUCE_SIZES,
                                        STARTUP_COLUMNS, XCCL_COLL_SIZES, XCCL_LAT_SIZES, XCCL_PT2PT_SIZES,
                                        XCCL_REDUCE_SIZES, XCCL_USING, family, header_columns, matched_meta,
                                        release_numbers, untitled_benchmark)
from commstack.tools.osu_install import MPI_DIR, NAME, local, native, source


def title_match(line: str, lineno: int = 0) -> tuple[Benchmark, re.Match] | None:
    """The benchmark an OSU title line names; None when the line is no OSU title."""
    m = OSU_TITLE.match(line)
    if not m:
        return None
    bench = BY_TITLE.get(m.group("api") + m.group("name"))
    if bench is None:
        raise UnknownFormatError("unknown OSU benchmark title", line, lineno)
    if bench.name in NCCL_TO_XCCL and release_numbers(m.group("ver")) >= (7, 3):
        bench = BENCHMARKS[NCCL_TO_XCCL[bench.name]]  # 7.3 renamed c/nccl osu_nccl_* to c/xccl osu_xccl_*
    return bench, m


def _untitled(t: Text, line: str, lineno: int, prelude: dict[str, Any]) -> Sweep | None:
    """The table a header starts where no title came: a 7.4+ xccl point-to-point run (after `#Using NCCL`) prints
    none, and the header tells latency from bandwidth; any other table whose title is cut is read where one
    benchmark prints its header (and window lines), its title's loss a note (`validated` is then no)."""
    bench = untitled_benchmark(BENCHMARKS.values(), line, lineno, prelude)
    if bench is None:
        return None
    if "xccl" in prelude:
        return Sweep(TOOL.name, bench.name, "", None, "ROCM" if prelude["xccl"] == "RCCL" else "CUDA", [],
                     meta=dict(prelude), title_line=Quoted(line, lineno))
    t.notes.append(Note(line, lineno, "osu", f"no title before the header: read as {bench.name}, the one benchmark "
                                             "that prints it"))
    return Sweep(TOOL.name, bench.name, "", None, None, [], meta={**prelude, TITLE_MISSING: True},
                 title_line=Quoted(line, lineno))


def _osu_tables(t: Text) -> list[Sweep]:
    sweeps: list[Sweep] = []
    cur: Sweep | None = None
    prelude: dict[str, Any] = {}  # lines that belong to the table whose title follows
    for line, lineno in t.lines:
        if titled := title_match(line, lineno):
            bench, m = titled
            if cur and not cur.columns and not cur.rows and line == cur.title_line.text:
                continue  # 6.2 and 7.2 osu_mbw_mr print their title twice
            cur = Sweep(TOOL.name, bench.name, line[2:], m.group("ver"), m.group("dev"), [], meta=prelude,
                        title_line=Quoted(line, lineno))
            prelude = {}
            sweeps.append(cur)
            continue
        if (cur is None or cur.rows and "xccl" in prelude) and (meta := matched_meta(OSU_META, line)) is not None:
            # before the header: a cut title's `# Datatype:` and window lines, 7.4+ xccl pt2pt's `# Send Buffer on`
            prelude.update(meta)
            continue
        if (meta := matched_meta(OSU_PRELUDE, line)) is not None:
            if cur is None or cur.rows:
                prelude.update(meta)  # the next table's
            else:
                cur.meta.update(meta)  # 5.7 osu_latency_mp: after its title
            continue
        if cur is None or cur.rows and prelude:
            if (untitled := _untitled(t, line, lineno, prelude)) is None:
                raise UnknownFormatError("text before any OSU title" if cur is None else
                                         "text between two OSU tables", line, lineno)
            cur, prelude = untitled, {}
            sweeps.append(cur)
            _header(sweeps, cur, line, lineno)
            continue
        if VALIDATION_ERROR.match(line):
            cur.error_lines.append(Quoted(line, lineno))
            continue
        if cur.benchmark in STARTUP_COLUMNS and not line.startswith("#"):
            mm = (INIT_LINE if cur.benchmark == "osu_init" else HELLO_LINE).match(line)
            if not mm or cur.rows:
                raise UnknownFormatError(f"{cur.benchmark} prints one line after its title, not this", line, lineno)
            cur.columns = ["size", *STARTUP_COLUMNS[cur.benchmark]]
            cur.rows.append(dict(zip(cur.columns, [0, *(int(v) for v in mm.groups())])))
            cur.row_lines.append(Quoted(line, lineno))
            continue
        if (meta := matched_meta(OSU_META, line)) is not None:  # every one a `# ` line
            if cur.rows and "datatype" in meta:  # 7.x -T all: each datatype is a table of its own, with its header
                cur = Sweep(TOOL.name, cur.benchmark, cur.title, cur.version, cur.device, [], meta=dict(cur.meta),
                            title_line=cur.title_line)
                sweeps.append(cur)
            cur.meta.update(meta)
            continue
        if line.startswith("#"):
            _header(sweeps, cur, line, lineno)
            continue
        if not cur.columns and not cur.rows and header_columns(line):
            _header(sweeps, cur, line, lineno)  # 5.x-6.x osu_ibarrier: a header without `#`
            continue
        if not cur.columns:
            raise UnknownFormatError("data row before the OSU column header", line, lineno)
        _row(t, cur, line, lineno)
    if prelude:
        raise TruncatedError("the output ends before the OSU title these lines announce", *t.lines[-1])
    for s in sweeps:
        if not s.columns:
            raise TruncatedError(f"{s.benchmark}: the output ends before the column header", *s.title_line)
        if not s.rows:
            raise TruncatedError(f"{s.benchmark}: the output ends before the first row", *s.title_line)
        if t.mem_limit:
            s.meta["mem_limit"] = t.mem_limit
    return sweeps


def _header(sweeps: list[Sweep], cur: Sweep, line: str, lineno: int) -> None:
    cols = header_columns(line)
    if not cols:  # None, or a bare "#" (an output cut after it)
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
        raise cut_row(t, line, lineno, f"row has {len(fields)} fields, the header {want}", want)
    if not fields[0][0].isdigit():  # a row starts with its size (barrier: its latency)
        raise UnknownFormatError("not a row of the table: it does not start with a number", line, lineno)
    values = fields if sized else ["0", *fields]
    row: dict[str, Any] = {}
    for col, val in zip(cur.columns, values):
        if col in COUNTS:
            row[col] = count(val, line, lineno)
        elif col == "validation":
            if val not in OSU_VALIDATION:
                raise cut_row(t, line, lineno, f"validation is {val!r}, not {' or '.join(OSU_VALIDATION)}")
            row[col] = OSU_VALIDATION[val]
        else:
            row[col] = number(val, line, lineno, OSU_NUMBER)
    if cur.rows:
        prev = cur.rows[-1]["size"]
        if not sized or row["size"] != (prev * 2 if prev else 1):
            raise UnknownFormatError(f"size {row['size']} after {prev}: OSU doubles the size, so rows are "
                                     f"missing or out of order", line, lineno)
    cur.rows.append(row)
    cur.row_lines.append(Quoted(line, lineno))


def parse_osu(text: str) -> list[Sweep]:
    """Every OSU table in `text` (a job script may run several), in order."""
    return read_output(text, _osu_tables)


def title(line: str) -> Benchmark | None:
    """The benchmark an OSU title names; its usage line instead of a table is an error of its own. A 7.3+
    xccl run starts with `#Using NCCL`: the title (a collective's) or the header (point-to-point) follows."""
    if titled := title_match(line):
        return titled[0]
    if XCCL_USING.match(line):
        return BENCHMARKS["osu_xccl_latency"]
    if line.startswith(("# Number of Sender threads:", "# Number of forked processes in sender:")):
        return BENCHMARKS["osu_latency_mt" if "threads" in line else "osu_latency_mp"]  # their lines before the title
    if OSU_USAGE.match(line):
        raise UnknownFormatError("OSU printed its usage: it does not take these options", line, 0)
    return None


def untitled(lines: list[Quoted], start: int = 0) -> Benchmark | None:
    """The benchmark an output without a title is, from lines[start] on: the header after its `# Datatype:` and
    window lines, where one benchmark prints it."""
    meta: dict[str, Any] = {}
    seen: set[re.Pattern] = set()
    for line, lineno in lines[start:]:
        kind = next(((pattern, read) for pattern, read in OSU_META if pattern.match(line)), None)
        if kind is None:
            return untitled_benchmark(BENCHMARKS.values(), line, lineno, meta)
        if kind[0] in seen:
            return None  # a kind of line twice: no one table's head
        seen.add(kind[0])
        meta.update(kind[1](kind[0].match(line)))
    return None


def first_size(bench: Benchmark, sweep: Sweep, lo: int) -> int:
    """The first size a sweep from `lo` prints, as OSU's loops go: by bytes, whole floats or whole elements of
    the `# Datatype:` (docs/osu-versions.md#default-sweep-no-m-per-benchmark-class-firstlast-row-as-printed)."""
    datatype = sweep.meta.get("datatype")
    if datatype and datatype not in DATATYPE_BYTES:
        raise UnknownFormatError(f"{bench.name}: datatype {datatype} of unknown size", *sweep.title_line)
    if not datatype and bench.elements_v5 > 1:
        return max(1, lo // bench.elements_v5) * bench.elements_v5
    element = DATATYPE_BYTES.get(datatype, 0)
    size = lo
    while size < element:
        size = size * 2 if size else 1
    return size


def last_size(bench: Benchmark, sweep: Sweep, args: list[str], ranks: int | None, hi: int) -> int:
    """OSU's check_mem_limit (5.3 - 7.4; docs/osu-versions.md): a gathering collective stops at -M / ranks."""
    if not bench.mem_limit_per_rank or family(sweep.version) == "7.5":
        return hi
    if ranks:
        hi = min(hi, bench.mem_limit(args) // ranks)
    if sweep.meta.get("mem_limit"):
        hi = min(hi, sweep.meta["mem_limit"])
    return hi


def program(b: Benchmark, p: Program) -> list[str]:
    exe = f"./{b.directory}/{b.name}" if p.container else f"{p.home}/{b.directory}/{b.name}"  # the image's WORKDIR
    device = p.device_args.get(b.directory, b.device_args) if p.memory == "device" else ()
    return [exe, *p.args, *p.size_args, *device]


TOOL = Tool(NAME, "OSU", "mpi", "mpi", COLUMNS, "$OSU_MPI", program, parse_osu, title, untitled=untitled,
            native=native, planned=native, local=local, source=source, family=family, zero_lo_is_default=True,
            first_size=first_size, last_size=last_size, in_env=InSpec("osu-micro-benchmarks", MPI_DIR),
            given=lambda binaries: "--osu-prefix" if binaries.osu_prefix else None)

SIZES = SizeFlags(range_flags=("-m", "--message-size"),
                  plain="OSU reads -m with atoll, so 1M would mean 1 byte")
PT2PT_DEVICE = ("-d", "cuda", "D", "D")
COLL_DEVICE = ("-d", "cuda")


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
    _osu("osu_bw", "OSU MPI Bandwidth Test", "pt2pt", "bandwidth_MBps", line_rate_factor=1, sender=0),
    _osu("osu_bibw", "OSU MPI Bi-Directional Bandwidth Test", "pt2pt", "bandwidth_MBps", line_rate_factor=2),
    _osu("osu_mbw_mr", "OSU MPI Multiple Bandwidth / Message Rate Test", "pt2pt", "bandwidth_MBps"),
    _osu("osu_multi_lat", "OSU MPI Multi Latency Test", "pt2pt", default_sizes=LAT_SIZES),
    _osu("osu_latency_mt", "OSU MPI Multi-threaded Latency Test", "pt2pt", default_sizes=LAT_SIZES),
    _osu("osu_latency_mp", "OSU MPI Multi-process Latency Test", "pt2pt", default_sizes=LAT_SIZES),
    _osu("osu_put_latency", "OSU MPI_Put Latency Test", "one-sided", default_sizes=ONE_SIDED_LAT_SIZES),
    _osu("osu_get_latency", "OSU MPI_Get latency Test", "one-sided", default_sizes=ONE_SIDED_LAT_SIZES),
    _osu("osu_put_bw", "OSU MPI_Put Bandwidth Test", "one-sided", "bandwidth_MBps", sender=0),
    _osu("osu_get_bw", "OSU MPI_Get Bandwidth Test", "one-sided", "bandwidth_MBps", sender=1),
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
    _osu("osu_barrier", "OSU MPI Barrier Latency Test", "collective", default_sizes=(), sized=False),
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
    _nbc("osu_ibarrier", "blocking Barrier", default_sizes=(), sized=False),
    # startup: one line, no table
    _osu("osu_init", "OSU MPI Init Test", "startup", "init_avg_ms", default_sizes=(), sized=False,
         device_args=()),
    _osu("osu_hello", "OSU MPI Hello World Test", "startup", "processes", default_sizes=(), sized=False,
         device_args=()),
    *(_xccl(f"osu_{api}_{name}", title, f"../{api}/{directory}", metric, default_sizes=sizes)
      for api in ("xccl", "nccl") for name, title, directory, metric, sizes in XCCL),
]}
#: an output's title, less device and version -> its benchmark
BY_TITLE: dict[str, Benchmark] = {t: b for b in BENCHMARKS.values() for t in b.titles}
#: 5.9 - 7.2 osu_nccl_* -> their 7.3+ names: the same titles
NCCL_TO_XCCL = {f"osu_nccl_{name}": f"osu_xccl_{name}" for name, *_ in XCCL}
