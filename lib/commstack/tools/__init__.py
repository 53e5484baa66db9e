"""The benchmark tools: one module per tool, each holding everything about its tool in one object, its `TOOL`
(a `Tool`), and its benchmarks. `run` and `results` ask the tool; they hold no per-tool branch. The contract a
tool module follows: docs/architecture.md#adding-a-benchmark-tool."""

from __future__ import annotations

from commstack.errors import ConfigError
from commstack.tools import fi_pingpong, mpi_pingpong, nccl_tests, osu, ucx_perftest
from commstack.tools.base import Benchmark, Column, Program, SizeFlags, Tool

__all__ = ["Benchmark", "Column", "Program", "SizeFlags", "Tool", "MODULES", "TOOLS", "get", "titled"]

MODULES = (osu, nccl_tests, mpi_pingpong, fi_pingpong, ucx_perftest)
TOOLS: dict[str, Tool] = {m.TOOL.name: m.TOOL for m in MODULES}


def get(name: str) -> Tool:
    try:
        return TOOLS[name]
    except KeyError:
        raise ConfigError(f"unknown tool {name!r}; known: {', '.join(TOOLS)}") from None


def titled(line: str) -> Benchmark | None:
    """The benchmark a first own line names, each tool asked in turn (Tool.title); None where none reads it."""
    return next((bench for tool in TOOLS.values() if (bench := tool.title(line))), None)
