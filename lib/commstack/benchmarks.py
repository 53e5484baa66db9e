"""The benchmark registry: one entry per benchmark, holding what the other modules need.

`run.steps` takes the binary's directory, the device-buffer and size arguments from here;
`results.parse` the title that identifies an output, the parser, and what a complete sweep is;
`results.judge` and `report` the judged metric, its unit and direction. Adding a benchmark is one
entry here, plus a parser in `results.parse` when its output format is new.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from commstack.errors import ConfigError


@dataclass(frozen=True)
class Column:
    """A parsed column: its unit (None: a count or a word) and, for a metric, its direction."""

    unit: str | None
    higher_is_better: bool | None = None  # None: not a metric


#: canonical column name -> Column; every parser names its columns from this table
COLUMNS: dict[str, Column] = {
    "size": Column("B"),
    "latency_us": Column("us", False),
    "min_latency_us": Column("us", False),
    "max_latency_us": Column("us", False),
    "iterations": Column(None),
    "bandwidth_MBps": Column("MB/s", True),
    "message_rate": Column("msg/s", True),
    "validation": Column(None),
    # nccl-tests: out-of-place (oop) and in-place (ip) halves of each row
    "count": Column(None),
    "type": Column(None),
    "redop": Column(None),
    "root": Column(None),
    "oop_time_us": Column("us", False),
    "oop_algbw_GBps": Column("GB/s", True),
    "oop_busbw_GBps": Column("GB/s", True),
    "oop_wrong": Column(None),
    "ip_time_us": Column("us", False),
    "ip_algbw_GBps": Column("GB/s", True),
    "ip_busbw_GBps": Column("GB/s", True),
    "ip_wrong": Column(None),
    # mpi-pingpong
    "time_s": Column("s", False),
    "bandwidth_GiBps": Column("GiB/s", True),
    "check": Column(None),
}

#: the metrics a reference may name: the columns with a direction
METRICS = {name: c for name, c in COLUMNS.items() if c.higher_is_better is not None}


def _bytes(flag: str, value: str, text: str) -> int:
    """A size of OSU's -m or -M, a plain byte count: OSU reads it with atoll(), which makes 1M 1 and
    abc 0 without a word, so anything else is refused here."""
    if not re.fullmatch(r"\d+", text.strip()):
        raise ConfigError(f"{flag} {value}: {text!r} is not a size in bytes")
    return int(text)


def byte_count(text: str) -> int:
    """A byte count with an optional K, M or G suffix (powers of 1024), as nccl-tests and
    mpi-pingpong read -b and -e."""
    m = re.fullmatch(r"(\d+)([KkMmGg]?)", text.strip())
    if not m:
        raise ConfigError(f"size {text!r} is not a byte count (suffix K, M or G)")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


def _options(args: list[str], flags: tuple[str, ...]) -> list[tuple[str, str]]:
    """(flag, value) of each of `flags` in `args`, in order, as getopt reads them: `-m V`, `-mV`,
    `--long V` and `--long=V`."""
    out = []
    for i, arg in enumerate(args):
        for flag in flags:
            if arg == flag and i + 1 < len(args):
                out.append((flag, args[i + 1]))
            elif arg.startswith(flag + "=") and flag.startswith("--"):
                out.append((flag, arg[len(flag) + 1:]))
            elif arg.startswith(flag) and len(arg) > len(flag) and not flag.startswith("--"):
                out.append((flag, arg[len(flag):]))
    return out


@dataclass(frozen=True)
class SizeFlags:
    """How a benchmark takes its message-size range on the command line."""

    range_flags: tuple[str, ...] = ()  # OSU: -m lo:hi (or hi, lo:, :hi)
    lo_flags: tuple[str, ...] = ()     # nccl-tests, mpi-pingpong: -b lo -e hi
    hi_flags: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()        # nccl-tests: -f 2, the doubling the other tools do by themselves

    def args(self, lo: int | str, hi: int | str) -> list[str]:
        if self.range_flags:
            return [self.range_flags[0], f"{lo}:{hi}"]
        return [self.lo_flags[0], str(lo), self.hi_flags[0], str(hi), *self.extra]

    def requested(self, args: list[str]) -> tuple[int | None, int | None]:
        """(lo, hi) that `args` ask for; None where they leave the benchmark's default. The last
        occurrence of a flag wins, as with getopt."""
        lo = hi = None
        for flag, value in _options(args, self.range_flags + self.lo_flags + self.hi_flags):
            if flag in self.range_flags:
                if ":" not in value:
                    hi = _bytes(flag, value, value)
                else:
                    a, b = value.split(":", 1)
                    lo = _bytes(flag, value, a) if a else lo
                    hi = _bytes(flag, value, b) if b else hi
            elif flag in self.lo_flags:
                lo = byte_count(value)
            else:
                hi = byte_count(value)
        return lo, hi


OSU_SIZES = SizeFlags(range_flags=("-m", "--message-size"))
NCCL_SIZES = SizeFlags(lo_flags=("-b", "--minbytes"), hi_flags=("-e", "--maxbytes"), extra=("-f", "2"))
PINGPONG_SIZES = SizeFlags(lo_flags=("-b",), hi_flags=("-e",))


@dataclass(frozen=True)
class Benchmark:
    name: str
    tool: str                          # osu | nccl-tests | mpi-pingpong; also names the parser
    titles: tuple[str, ...]            # how its output names it (OSU: the title, less device and version)
    metric: str                        # the judged column, a key of METRICS
    sizes: SizeFlags
    #: (lo, hi) of a sweep run without size arguments, per version family (OSU major version;
    #: "" for tools with one format); learnt from the recorded real outputs in tests/data
    default_sizes: tuple[tuple[str, tuple[int, int]], ...] = ()
    directory: str | None = None       # OSU: under libexec/osu-micro-benchmarks/mpi
    device_args: tuple[str, ...] = ()  # buffers on the GPU (seed 004: -d cuda D D)
    min_ranks: int = 2
    #: OSU collectives that shrink their largest size to 512 MiB / ranks (check_mem_limit)
    mem_limit_per_rank: bool = False
    sized: bool = True                 # False: one row without a message size (barrier)
    line_rate_factor: int | None = None  # NICs' line rate one pair may use (bibw: both ways at once)
    #: OSU 5.x reductions count MPI_FLOATs: their sweep starts at (lo // 4, at least 1) floats
    elements_v5: int = 1

    @property
    def unit(self) -> str:
        return COLUMNS[self.metric].unit

    @property
    def higher_is_better(self) -> bool:
        return COLUMNS[self.metric].higher_is_better

    def mem_limit(self, args: list[str]) -> int:
        """OSU's -M: the bytes a collective may allocate, 512 MiB unless given."""
        limit = 512 << 20
        for flag, value in _options(args, ("-M", "--mem-limit")):
            limit = _bytes(flag, value, value)
        return limit

    def first_size(self, version: str | None, lo: int, element: int) -> int:
        """The first size a sweep from `lo` prints, as OSU's loops go: 5.x reductions round down to
        whole floats; 7.x skips the sizes that hold no whole `element` (the -T datatype's bytes)."""
        if self.tool == "osu" and (version or "").split(".")[0] == "5" and self.elements_v5 > 1:
            return max(1, lo // self.elements_v5) * self.elements_v5
        size = lo
        while size < element:
            size = size * 2 if size else 1
        return size

    def defaults(self, version: str | None) -> tuple[int, int] | None:
        """The sizes a run without size arguments covers, for this output's version; None when
        no recorded output of that version family taught it."""
        family = (version or "").split(".")[0] if self.tool == "osu" else ""
        return dict(self.default_sizes).get(family)


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
    return Benchmark(name, "osu", (title,), metric, OSU_SIZES, kw.pop("default_sizes", defaults), directory,
                     device, **kw)


def _nccl(name: str) -> Benchmark:
    # no default sizes: nccl-tests prints the range it runs (minBytes, maxBytes); min_ranks 1: one
    # rank may drive every GPU
    return Benchmark(name, "nccl-tests", (name,), "oop_busbw_GBps", NCCL_SIZES, min_ranks=1)


_ALL = [
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
    *(_nccl(n) for n in ("all_reduce_perf", "all_gather_perf", "alltoall_perf", "broadcast_perf",
                         "reduce_perf", "reduce_scatter_perf", "sendrecv_perf")),
    Benchmark("mpi-pingpong", "mpi-pingpong", ("mpi-pingpong",), "bandwidth_GiBps", PINGPONG_SIZES,
              (("", (8, 1 << 30)),)),
]

BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in _ALL}
#: an output's title (see `titles`) -> its benchmark
BY_TITLE: dict[str, Benchmark] = {t: b for b in _ALL for t in b.titles}


def get(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ConfigError(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}") from None
