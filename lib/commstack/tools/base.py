"""The types every tool module builds on: a parsed column, a tool's size flags, a benchmark and a tool
(the contract a tool module follows: docs/architecture.md#adding-a-benchmark-tool)."""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal

from commstack.errors import BinaryNotFoundError, ConfigError

if TYPE_CHECKING:
    from commstack.tools.lines import Quoted, Sweep

LAYERS = ("fabric", "ucx", "mpi", "nccl")  # bottom up
LAUNCHES = ("mpi", "pair")  # one program of N ranks; a server and a client
#: where the images put things (containers/templates: the view)
IMAGE_VIEW = "/opt/view"
#: a `pair` tool's launch: commstack.run.pair in each task, which prints the client's command line after CLIENT_LINE
MODULE = [sys.executable, "-m", "commstack.run.pair"]
CLIENT_LINE = "# commstack pair client: "
RENDEZVOUS, TIMEOUT = "{rendezvous}", "{timeout}"  # placeholders of pair_command(), filled by run.pair.placed()


def pair_command(program: str, server: str, client: str) -> list[str]:
    """The argv of a pair step: commstack.run.pair in each task, the binary and both command lines."""
    return [*MODULE, RENDEZVOUS, TIMEOUT, "--program", program, "--server", server, "--client", client]


def client_argv(line: str, program: str) -> list[str] | None:
    """The client's arguments, without the program, from the line commstack.run.pair writes before a client's
    output (CLIENT_LINE), when that client is `program`; None for any other line."""
    if not line.startswith(CLIENT_LINE):
        return None
    argv = shlex.split(line[len(CLIENT_LINE):])
    return argv[1:] if argv and argv[0].rsplit("/", 1)[-1] == program else None


def times_step(sweep: Sweep, size: int) -> int:
    """The size after `size` in a sweep whose sizes grow by a factor (its meta `step`, 2 by default)."""
    return size * sweep.meta.get("step", 2) if size else 1


@dataclass(frozen=True)
class Column:
    """A parsed column: its unit (None: a count or a word), for a metric its direction, and how a report
    shows it (label, unit, factor from the recorded unit)."""

    unit: str | None
    higher_is_better: bool | None = None  # None: not a metric
    shown: tuple[str, str, float] | None = None
    wrong: bool = False  # a count of wrong elements: any but 0 is a failed data check


def plain_bytes(flag: str, value: str, text: str) -> int:
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


def options(args: list[str], flags: tuple[str, ...]) -> list[tuple[str, str]]:
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


def on_path(name: str, package: str, builds: str,
            placeholder: str) -> tuple[Callable[[Any], str], Callable[[Any], str]]:
    """`native` and `planned` of a tool whose binary is found on PATH (the Debian `package`, the view of an env
    that `builds` it): missing, a BinaryNotFoundError saying how to get it; in a plan, its placeholder then."""
    how = (f"on a workstation `apt-get install {package}` (Debian; ci/apt-packages.txt), on a system the env that "
           f"builds {builds} (`spack env activate envs/gh200-ompi`: its view has {name})")
    def native(binaries: Any) -> str:
        found = shutil.which(name)
        if not found:
            raise BinaryNotFoundError(f"{name} not found on PATH: {how}")
        return found

    def planned(binaries: Any) -> str:
        return shutil.which(name) or placeholder
    return native, planned


@dataclass(frozen=True)
class InSpec:
    """Where a tool's program is in an env (`commstack run --env`): the spec that provides it, and its path
    under that spec's prefix (the env's view puts the prefix where its projections say)."""

    spec: str
    path: str


@dataclass(frozen=True)
class SizeFlags:
    """How a benchmark takes its message-size range on the command line."""

    range_flags: tuple[str, ...] = ()  # OSU: -m lo:hi (or hi, lo:, :hi), plain bytes
    lo_flags: tuple[str, ...] = ()     # nccl-tests, mpi-pingpong: -b lo -e hi, with K, M, G suffixes
    hi_flags: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()        # nccl-tests: -f 2, the doubling the other tools do by themselves
    #: why the sizes of a suite must be plain bytes (None: K, M and G suffixes are read)
    plain: str | None = None

    def args(self, lo: int | str, hi: int | str) -> list[str]:
        if not (self.range_flags or self.lo_flags):
            raise ConfigError(f"sizes {lo}..{hi}: this benchmark takes no size range; give its sizes in its own "
                              "arguments (fi_pingpong -S, ucx_perftest -s)")
        if self.range_flags:
            return [self.range_flags[0], f"{lo}:{hi}"]
        return [self.lo_flags[0], str(lo), self.hi_flags[0], str(hi), *self.extra]

    def requested(self, args: list[str]) -> tuple[int | None, int | None]:
        """(lo, hi) that `args` ask for; None where they leave the benchmark's default. The last
        occurrence of a flag wins, as with getopt."""
        lo = hi = None
        for flag, value in options(args, self.range_flags + self.lo_flags + self.hi_flags):
            if flag in self.range_flags:
                a, b = value.split(":", 1) if ":" in value else ("", value)
                lo = plain_bytes(flag, value, a) if a else lo
                hi = plain_bytes(flag, value, b) if b or ":" not in value else hi
            elif flag in self.lo_flags:
                lo = byte_count(value)
            else:
                hi = byte_count(value)
        return lo, hi


@dataclass(frozen=True)
class Program:
    """What a tool's argv builder gets for one step."""

    args: list[str]            # the suite step's own arguments
    size_args: list[str]       # the size flags of the step's sizes (SizeFlags.args), or none
    memory: str                # host | device
    container: bool            # in an image (its paths), else native
    home: str                  # the native binary or prefix, or the tool's placeholder for the dry run
    mode: str | None           # one of the tool's modes, for a tool that has them
    device_args: dict[str, list[str]]  # the suite's device arguments per benchmark directory
    provider: str | None = None  # the system's libfabric provider (System.fabric), for the fabric's tools


@dataclass(frozen=True)
class Benchmark:
    name: str
    tool: Tool
    titles: tuple[str, ...]            # how its output names it (OSU: the title, less device and version)
    metric: str                        # the judged column, a key of its tool's columns
    sizes: SizeFlags
    #: (lo, hi) of a sweep run without size arguments, per version family (Tool.family); from the tool's
    #: own source (OSU: docs/osu-versions.md), checked against the recorded real outputs in tests/data
    default_sizes: tuple[tuple[str, tuple[int, int]], ...] = ()
    directory: str | None = None       # OSU: under libexec/osu-micro-benchmarks/mpi
    device_args: tuple[str, ...] = ()  # buffers on the GPU (seed 004: -d cuda D D)
    min_ranks: int = 2
    #: OSU collectives that shrink their largest size to 512 MiB / ranks (check_mem_limit)
    mem_limit_per_rank: bool = False
    sized: bool = True                 # False: one row without a message size (barrier)
    line_rate_factor: int | None = None  # NICs' line rate one pair may use (bibw: both ways at once)
    #: the rank whose data the figure carries, in a one-way test of two ranks (osu_bw: 0 sends; ucx_perftest
    #: tag_bw: 1, the client); None: a round trip or both ways at once, one figure for both directions
    sender: int | None = None
    #: OSU reductions that count MPI_FLOATs (5.3 - 7.0, xccl): their sweep starts at (lo // 4, at least 1) floats
    elements_v5: int = 1

    def mem_limit(self, args: list[str]) -> int:
        """OSU's -M: the bytes a collective may allocate, 512 MiB unless given, and never below 1 MiB (OSU's
        set_max_memlimit raises a lower one to MAX_MEM_LOWER_LIMIT, saying so on stderr)."""
        limit = 512 << 20
        for flag, value in options(args, ("-M", "--mem-limit")):
            limit = max(plain_bytes(flag, value, value), 1 << 20)
        return limit

    def defaults(self, version: str | None, title_missing: bool = False) -> tuple[int, int] | None:
        """The sizes a run without size arguments covers, for this output's version; None when
        no recorded output of that version family taught it. A table whose title (and version) was cut has
        those every family shares, where they agree."""
        sizes = dict(self.default_sizes)
        if title_missing and len(set(sizes.values())) == 1:
            return next(iter(sizes.values()))
        return sizes.get(self.tool.family(version))


@dataclass(frozen=True, eq=False)
class Tool:
    """Everything about one benchmark tool; its module's TOOL. Its contract: docs/architecture.md."""

    name: str                          # as records, sweeps and `commstack parse --json` name it
    label: str                         # as an error names its output ("OSU")
    layer: Literal["fabric", "ucx", "mpi", "nccl"]  # the stack layer it measures: the diagnosis compares layers
    #: `pair`: a server (task 0) and a client (task 1) on a node pair, its argv pair_command()'s
    launch: Literal["mpi", "pair"]
    #: canonical column name -> Column; its parser names columns so, and a benchmark's metric is one
    columns: dict[str, Column]
    placeholder: str                   # stands for the native binary in a dry run: $OSU_MPI
    #: the step's argv: the binary (natively under Program.home, the native path or the placeholder of a dry run;
    #: in an image at its path there), then its arguments, sizes, device arguments and mode
    program: Callable[[Benchmark, Program], list[str]]
    #: every table of an output, no completeness check; Sweep.version from the output where it prints one
    parse: Callable[[str], list[Sweep]]
    #: the benchmark a first line (the title) names; None: not this tool's; UnknownFormatError: its, but unknown
    title: Callable[[str], Benchmark | None]
    #: the benchmark an output whose title is missing is, from its own lines from an index on;
    #: None: not this tool's table; UnknownFormatError: its, but several benchmarks print it (None here: never so)
    untitled: Callable[[list[Quoted], int], Benchmark | None] | None = None
    #: the native binary (prefix or path), got (found, built) when missing; BinaryNotFoundError says how (a Debian
    #: package on a workstation, the env on a system). It only reads the run's options (commstack.run.binaries, the
    #: resolver, keeps what is found). None: a `local` tool's binary that the run names no way to
    native: Callable[[Any], str | None] | None = None
    #: where the native binary is or will be, for a dry run: nothing is built (None: the dry run names none)
    planned: Callable[[Any], str] | None = None
    variables: tuple[tuple[str, str], ...] = ()  # set for every launch
    gpus: bool = False                 # needs GPUs whatever the memory
    modes: tuple[str, ...] = ()        # the `mode:` values a suite step may give; the first is the default
    tags: Callable[[str], dict[str, Any]] = lambda environment: {}  # what references select on, per environment
    #: the stack facts an output tells, and the problem they show (None: fine), from the step's output,
    #: the system and the step's tags
    stack: Callable[[str, Any, dict], tuple[dict, str | None]] | None = None
    family: Callable[[str | None], str] = lambda version: ""  # a printed version -> the key of default_sizes
    #: the meta keys of a printed size range (lo, hi): the output says what it ran
    printed_range: tuple[str, str] | None = None
    zero_lo_is_default: bool = False   # a minimum of 0 is refused and the default kept (OSU)
    #: the size of the sweep's first row, from lo as asked for
    first_size: Callable[[Benchmark, Sweep, int], int] = lambda bench, sweep, lo: lo
    next_size: Callable[[Sweep, int], int] = times_step  # the size after `size` in a sweep
    #: the largest size a sweep asked to reach `hi` goes to, with its arguments and ranks (OSU: a memory limit)
    last_size: Callable[[Benchmark, Sweep, list[str], int | None, int], int] = lambda bench, sweep, args, ranks, hi: hi
    #: the tool's own check that a sweep has every size its arguments ask for, in place of the (lo, hi)
    #: range's (fi_pingpong's fixed size lists, ucx_perftest's one size); None: the range's
    sizes_check: Callable[[Benchmark, Sweep, list[str]], None] | None = None
    #: where an env holds the native binary (Program.home); None: an env never does
    in_env: InSpec | None = None
    #: the option that gave the binary explicitly (it wins over --env), or None
    given: Callable[[Any], str | None] = lambda binaries: None
    #: a tool the local Spack env builds (in_env's spec there, OSU): its binary from that install's prefix (None:
    #: none, or why it could not be built), where `native` gives none; the resolver looks it up and installs it
    local: Callable[[str | None, str | None], str] | None = None
    #: what named the native binary, for the record (OSU: the option, the variable or the local env)
    source: Callable[[Any], str] | None = None
    #: with --env, whether a binary the env's view lacks is got as without it (mpi-pingpong: built with make)
    env_optional: bool = False
    #: the programs the facts probe runs from the env (commstack.run.facts: fi_info, ucx_info)
    facts: tuple[InSpec, ...] = ()

    def __post_init__(self):
        if self.layer not in LAYERS or self.launch not in LAUNCHES:
            raise ValueError(f"tool {self.name}: layer {self.layer!r} (one of {LAYERS}), launch {self.launch!r} "
                             f"(one of {LAUNCHES})")
