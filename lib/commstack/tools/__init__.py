"""The benchmark tools: one module per tool, each holding everything about its tool in one object,
its `TOOL` (a `Tool`), and its benchmarks. `run` and `results` ask the tool; they hold no per-tool
branch.

The contract a tool module follows (see osu, nccl_tests, mpi_pingpong; fi_pingpong and ucx_perftest
are `pair` tools):

- `TOOL = Tool(name, label, layer, launch, COLUMNS, placeholder, program, parse, title, ...)`:
  - `layer`: the stack layer it measures, one of fabric, ucx, mpi, nccl (the diagnosis compares layers);
  - `launch`: `mpi`, one program of N ranks, or `pair`, a server (task 0) and a client (task 1) on a
    node pair: its argv is tools.base's `pair_command()`, commstack.run.pair in each task;
  - `COLUMNS`: canonical column name -> `Column` (unit, direction for a metric, how a report shows it,
    whether it counts wrong elements); the parser names its columns from it, a benchmark's metric is one;
  - `program(benchmark, Program) -> argv`: the binary (natively under `Program.home`, the native path or
    the `placeholder` of a dry run; in an image at its path there), then its arguments, sizes, device
    arguments and mode;
  - `parse(text) -> list[Sweep]`: every table of one output, strict (commstack.tools.lines: an unknown
    line is an error quoting it); it sets `Sweep.version` from the output where the output prints one;
  - `title(line) -> Benchmark | None`: the benchmark a first own line names, None where the line is not
    this tool's, UnknownFormatError where it is but names no known benchmark;
  - `untitled(lines, start) -> Benchmark | None` (optional): in a job log whose title was cut, the benchmark the
    lines after it (tools.lines.Quoted, from lines[start]) leave, None where they are not this tool's,
    UnknownFormatError naming the benchmarks where several print them (OSU: its header);
  - `native(binaries)`: the native binary or prefix, found or built; BinaryNotFoundError says how to get
    it (a Debian package on a workstation, the env on a system); `planned(binaries)`: where it is or
    will be for a dry run, building nothing; both only read the run's options: the resolver
    (commstack.run.binaries) asks them once per run and keeps the answer, and for a `local` tool (OSU) whose
    binary the run names no way to, looks up (or installs) the local Spack env's and asks `local(prefix)`;
  - `variables`, `gpus`, `modes`, `tags(environment)`, `stack(output, system, tags)`: what every launch
    sets, whether it always needs GPUs, the `mode:` values of a suite step, the tags references select
    on, and the stack facts its output tells with the problem they show;
  - the completeness check's hooks: `family(version)` (the key of `Benchmark.default_sizes`),
    `printed_range` (meta keys of the range an output says it ran), `zero_lo_is_default`,
    `first_size(benchmark, sweep, lo)`, `last_size(benchmark, sweep, args, ranks, hi)` (OSU: its memory limit);
    or `sizes_check(benchmark, sweep, args)`, the tool's own.
- `BENCHMARKS = {name: Benchmark(name, TOOL, titles, metric, SizeFlags(...), default_sizes, ...)}`.
- registry entries: the module in MODULES below (the order `commstack parse` tries titles in is this
  order), and its recorded real outputs under tests/data with their index.

Adding a tool is one module, its entry here, and its recorded outputs.
"""

from __future__ import annotations

from commstack.errors import ConfigError
from commstack.tools import fi_pingpong, mpi_pingpong, nccl_tests, osu, ucx_perftest
from commstack.tools.base import Benchmark, Column, Program, SizeFlags, Tool

__all__ = ["Benchmark", "Column", "Program", "SizeFlags", "Tool", "MODULES", "TOOLS", "get", "titled"]

MODULES = (osu, nccl_tests, mpi_pingpong, fi_pingpong, ucx_perftest)
#: tool name -> Tool
TOOLS: dict[str, Tool] = {m.TOOL.name: m.TOOL for m in MODULES}


def get(name: str) -> Tool:
    try:
        return TOOLS[name]
    except KeyError:
        raise ConfigError(f"unknown tool {name!r}; known: {', '.join(TOOLS)}") from None


def titled(line: str) -> Benchmark | None:
    """The benchmark a first own line names, each tool asked in turn (Tool.title); None where none reads it,
    UnknownFormatError where a tool's title names a benchmark it does not know."""
    return next((bench for tool in TOOLS.values() if (bench := tool.title(line))), None)
