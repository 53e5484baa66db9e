"""nccl-tests (all_reduce_perf, ...) and AMD's rccl-tests: the NCCL layer's benchmarks, one MPI program of N
ranks on GPUs, run with NCCL_DEBUG=INFO (the stack facts). Each version's format:
docs/harness.md#the-formats-read-per-tool."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from commstack.errors import BinaryNotFoundError, UnknownFormatError
from commstack.tools.lines import Sweep, read_output
from commstack.tools.base import IMAGE_VIEW, Benchmark, Column, InSpec, Program, SizeFlags, Tool, times_step
from commstack.tools.nccl_tables import HALF, PARAMS, START, VERSION, tables


#: the out-of-place (oop) and in-place (ip) halves of each row (nccl_tables.HALF); the judged figure is out of place
COLUMNS = {"size": Column("B"), "count": Column(None), "type": Column(None), "redop": Column(None),
           "root": Column(None), **{f"{h}_{name}": column for h in ("oop", "ip") for name, column in HALF.values()},
           "algo": Column(None), "proto": Column(None), "nchannels": Column(None), "timestamp": Column(None),
           "oop_busbw_GBps": Column("GB/s", True, ("bus bandwidth", "GB/s", 1.0))}  # keeps its place among them


def parse(text: str) -> list[Sweep]:
    """Every table of one nccl-tests or rccl-tests output (commstack.tools.nccl_tables)."""
    return read_output(text, lambda t: tables(t, TOOL.name, BENCHMARKS))


def title(line: str) -> Benchmark | None:
    """The benchmark a first line names: the start marker's; a version or parameter line names none yet
    (UNNAMED: the parser reads the name where the output prints one)."""
    if (m := START.match(line)):
        if m.group(1) not in BENCHMARKS:
            raise UnknownFormatError("unknown nccl-tests benchmark", line, 0)
        return BENCHMARKS[m.group(1)]
    if VERSION.match(line) or PARAMS.match(line):
        return UNNAMED
    return None


def first_size(bench: Benchmark, sweep: Sweep, lo: int) -> int:
    """nccl-tests may round the first size down to its element count: lo or less."""
    return min(lo, sweep.rows[0]["size"])


def next_size(sweep: Sweep, size: int) -> int:
    """The size after `size`: times the step factor (-f), or plus the step in bytes (-i: linear steps)."""
    return size + sweep.meta["step"] if sweep.meta.get("step_kind") == "bytes" else times_step(sweep, size)


def program(b: Benchmark, p: Program) -> list[str]:
    exe = f"{IMAGE_VIEW}/bin/{b.name}" if p.container else f"{p.home}/{b.name}"
    return [exe, *p.size_args, *p.args]


def native(binaries: Any) -> str:
    raise BinaryNotFoundError("no native nccl-tests on this system: run it in the nccl-tests image "
                              "(environments: [nccl-tests]) or give the run an env that has it (--env ENV, or the "
                              "system's install: {env: ENV})")


NCCL_OFI_SELECTED = re.compile(r"^(?:(\S+?):\d+:\d+ \[\d+\] )?NCCL INFO NET/OFI Selected [Pp]rovider is ([\w;+:-]+)")
NCCL_NETWORK = re.compile(r"^(?:(\S+?):\d+:\d+ \[\d+\] )?NCCL INFO (?:Using network|NET/Plugin:?) (.*)$")


def nccl_net(text: str) -> dict[str, dict]:
    """Per node (the host prefix of NCCL's INFO lines), the network NCCL used and the OFI provider the
    aws-ofi-nccl plugin selected (None: the plugin selected none, or NCCL did not load it)."""
    out: defaultdict[str, dict] = defaultdict(lambda: {"ofi_provider": None, "network": []})
    for line in text.splitlines():
        if m := NCCL_OFI_SELECTED.match(line):
            out[m.group(1) or "?"]["ofi_provider"] = m.group(2)
        elif (m := NCCL_NETWORK.match(line)) and m.group(2) not in out[m.group(1) or "?"]["network"]:
            out[m.group(1) or "?"]["network"].append(m.group(2))
    return dict(out)


def nccl_plugin_problem(required: str | None, tags: dict, nets: dict[str, dict]) -> str | None:
    """Why an NCCL step fails on a system whose NCCL must use the `required` net plugin (ofi), or None.
    A step run with the plugin's hook off on purpose (aws_ofi_nccl_hook: false) is exempt."""
    if required != "ofi" or tags.get("aws_ofi_nccl_hook") is False:
        return None
    without = sorted(host for host, n in nets.items() if not n["ofi_provider"])
    if not nets:
        return ("NCCL did not select the OFI net plugin (no 'NET/OFI Selected provider' line in its "
                "NCCL_DEBUG=INFO output): it ran on another network, whatever its bandwidth")
    if without:
        used = "; ".join(sorted({", ".join(nets[h]["network"]) or "unknown" for h in without}))
        return (f"NCCL did not select the OFI net plugin on {', '.join(without)} (network: {used}), "
                "whatever its bandwidth")
    return None


def tags(environment: str) -> dict[str, Any]:
    """What the references select on: whether the aws-ofi-nccl hook of the image is on."""
    return {"aws_ofi_nccl_hook": not environment.endswith("no-awsofinccl")}


def stack(out: str, system: Any, step_tags: dict) -> tuple[dict, str | None]:
    """The net plugin NCCL used per node (its INFO lines), and the problem where the system requires
    another one."""
    nets = nccl_net(out)
    return {"nccl_net": nets}, nccl_plugin_problem(system.nccl_net_plugin, step_tags, nets)


TOOL = Tool("nccl-tests", "nccl-tests", "nccl", "mpi", COLUMNS, "$NCCL_TESTS", program, parse, title,
            native=native, in_env=InSpec("nccl-tests", "bin"), variables=(("NCCL_DEBUG", "INFO"),), gpus=True,
            tags=tags, stack=stack, printed_range=("minBytes", "maxBytes"), first_size=first_size,
            next_size=next_size)
SIZES = SizeFlags(lo_flags=("-b", "--minbytes"), hi_flags=("-e", "--maxbytes"), extra=("-f", "2"))
#: each binary as `make` names it: NAME_perf, and NAME_perf_mpi where built with NAME_SUFFIX=_mpi (2.15.1+,
#: the README's MPI example). No default sizes: nccl-tests prints the range it runs (minBytes, maxBytes);
#: min_ranks 1: one rank may drive every GPU
BENCHMARKS: dict[str, Benchmark] = {
    name + suffix: Benchmark(name + suffix, TOOL, (name + suffix,), "oop_busbw_GBps", SIZES, min_ranks=1)
    for name in ("all_reduce_perf", "all_gather_perf", "alltoall_perf", "alltoallv_perf", "broadcast_perf",
                 "gather_perf", "hypercube_perf", "reduce_perf", "reduce_scatter_perf", "scatter_perf",
                 "sendrecv_perf")
    for suffix in ("", "_mpi")}
#: an output that does not name its binary (before 2.16.7): the same sizes and metric as every binary's
UNNAMED = Benchmark("nccl-tests", TOOL, (), "oop_busbw_GBps", SIZES, min_ranks=1)
