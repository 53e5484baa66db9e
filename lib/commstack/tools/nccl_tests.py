"""nccl-tests (all_reduce_perf, ...): the NCCL layer's benchmarks, one MPI program of N ranks on GPUs.

`# Collective test starting: NAME` names the benchmark; the parameters line prints the size range it
runs (minBytes, maxBytes), so a run without size arguments needs no learnt defaults; each row holds an
out-of-place and an in-place half. It runs with NCCL_DEBUG=INFO, whose lines say which net plugin NCCL
used (the stack facts). No native install on the local systems: it runs in the nccl-tests image.
"""

from __future__ import annotations

import re
from typing import Any

from commstack.errors import BadNumberError, BinaryNotFoundError, TruncatedError, UnknownFormatError
from commstack.results.lines import (Sweep, Text, assign_warnings, check_last_line, count, cut_number, cut_row, number,
                                     own_lines)
from commstack.run.facts import nccl_net, nccl_plugin_problem
from commstack.tools.base import IMAGE_VIEW, Benchmark, Column, Program, SizeFlags, Tool

#: the out-of-place (oop) and in-place (ip) halves of each row
COLUMNS = {
    "size": Column("B"),
    "count": Column(None),
    "type": Column(None),
    "redop": Column(None),
    "root": Column(None),
    "oop_time_us": Column("us", False),
    "oop_algbw_GBps": Column("GB/s", True),
    "oop_busbw_GBps": Column("GB/s", True, ("bus bandwidth", "GB/s", 1.0)),
    "oop_wrong": Column(None, wrong=True),
    "ip_time_us": Column("us", False),
    "ip_algbw_GBps": Column("GB/s", True),
    "ip_busbw_GBps": Column("GB/s", True),
    "ip_wrong": Column(None, wrong=True),
}

NCCL_START = re.compile(r"^# Collective test starting: (\S+)$")
NCCL_END = re.compile(r"^# Collective test concluded: (\S+)$")
NCCL_PARAMS = re.compile(r"^# nThread .*")
NCCL_DEVICE = re.compile(
    r"^#\s+Rank\s+(?P<rank>\d+) Group\s+(?P<group>\d+) Pid\s+(?P<pid>\d+) on\s+(?P<host>\S+) device\s+(?P<device>\d+)"
    r" \[(?P<pci>[0-9a-fA-Fx:.]+)\] (?P<name>.+)$")
NCCL_OOB = re.compile(r"^# Out of bounds values : (\d+) (OK|FAILED)$")
NCCL_AVG = re.compile(r"^# Avg bus bandwidth\s+: (\S+)\s*$")
NCCL_HEADER = ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
               "busbw", "#wrong"]
NCCL_SUBHEADERS = (["out-of-place", "in-place"],
                   ["(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "(us)", "(GB/s)", "(GB/s)"])
NCCL_COLUMNS = ["size", "count", "type", "redop", "root",
                "oop_time_us", "oop_algbw_GBps", "oop_busbw_GBps", "oop_wrong",
                "ip_time_us", "ip_algbw_GBps", "ip_busbw_GBps", "ip_wrong"]


def _nccl_params(line: str) -> dict[str, Any]:
    # "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: 20 ..."
    body = line[1:].replace(":", " ")
    body = re.sub(r"(\d+)\((\w+)\)", r"\1 \2", body)
    out: dict[str, Any] = {}
    key: list[str] = []
    for tok in body.split():
        if re.fullmatch(r"-?\d+", tok):
            out["_".join(key) or "value"] = int(tok)
            key = []
        elif tok in ("factor", "bytes") and out:
            out["step_kind"] = tok
        else:
            key.append(tok)
    return out


def parse_nccl(text: str) -> Sweep:
    t = own_lines(text)
    try:
        return _nccl_table(t)
    except BadNumberError as e:
        raise cut_number(t, e) from None


def _nccl_table(t: Text) -> Sweep:
    sweep: Sweep | None = None
    in_devices = False
    for lineno, line in t.lines:
        m = NCCL_START.match(line)
        if m:
            if sweep is not None:
                raise UnknownFormatError("a second nccl-tests run in one output", line, lineno)
            if m.group(1) not in BENCHMARKS:
                raise UnknownFormatError("unknown nccl-tests benchmark", line, lineno)
            sweep = Sweep(TOOL.name, m.group(1), line[2:], None, "CUDA", [], title_line=(lineno, line))
            sweep.meta["devices"] = []
            sweep.complete = False
            continue
        if sweep is None:
            raise UnknownFormatError("text before '# Collective test starting'", line, lineno)
        if sweep.complete:
            raise UnknownFormatError("output after '# Collective test concluded'", line, lineno)
        if (m := NCCL_END.match(line)):
            if m.group(1) != sweep.benchmark:  # also a cut end line
                raise UnknownFormatError(f"the end line names another benchmark than {sweep.benchmark}", line, lineno)
            sweep.complete = True
            continue
        if NCCL_PARAMS.match(line):
            sweep.meta.update(_nccl_params(line))
            continue
        if line.strip() == "# Using devices":
            in_devices = True
            continue
        if (m := NCCL_DEVICE.match(line)):
            if not in_devices:
                raise UnknownFormatError("device line outside '# Using devices'", line, lineno)
            d = m.groupdict()
            sweep.meta["devices"].append({"rank": int(d["rank"]), "host": d["host"], "device": int(d["device"]),
                                          "pci": d["pci"], "name": d["name"].strip()})
            continue
        if (m := NCCL_OOB.match(line)):
            sweep.meta["out_of_bounds"] = int(m.group(1))
            if m.group(2) != "OK":
                sweep.error_lines.append((lineno, line))
            continue
        if (m := NCCL_AVG.match(line)):
            sweep.meta["avg_busbw_GBps"] = number(m.group(1), line, lineno)
            continue
        if line.startswith("#"):
            toks = line[1:].split()
            if not toks:
                in_devices = False
            elif toks == NCCL_HEADER:
                sweep.columns = list(NCCL_COLUMNS)
            elif toks not in NCCL_SUBHEADERS:
                raise UnknownFormatError("unknown nccl-tests header line", line, lineno)
            continue
        if not sweep.columns:
            raise UnknownFormatError("data row before the nccl-tests column header", line, lineno)
        fields = line.split()
        if len(fields) != len(NCCL_COLUMNS):
            raise cut_row(t, lineno, line, f"row has {len(fields)} fields, nccl-tests rows have {len(NCCL_COLUMNS)}",
                          len(NCCL_COLUMNS))
        row: dict[str, Any] = {}
        for col, val in zip(NCCL_COLUMNS, fields):
            if col in ("size", "count"):
                row[col] = count(val, line, lineno)
            elif col in ("type", "redop"):
                row[col] = val
            elif col == "root":
                row[col] = int(number(val, line, lineno))
            elif col.endswith("_wrong"):
                row[col] = None if val == "N/A" else count(val, line, lineno)
            else:
                row[col] = number(val, line, lineno)
        if sweep.rows and row["size"] <= sweep.rows[-1]["size"]:
            raise UnknownFormatError("message sizes do not increase", line, lineno)
        if row["oop_wrong"] or row["ip_wrong"]:
            sweep.error_lines.append((lineno, line))
        sweep.rows.append(row)
        sweep.row_lines.append((lineno, line))
    if not sweep.rows:  # (sweep is set: a first line that does not start the run is an error above)
        raise TruncatedError("the output ends before the first row", *t.lines[-1][::-1])
    check_last_line(t, [sweep])
    assign_warnings([sweep], t)
    return sweep


def title(line: str) -> Benchmark | None:
    m = NCCL_START.match(line)
    if not m:
        return None
    if m.group(1) not in BENCHMARKS:
        raise UnknownFormatError("unknown nccl-tests benchmark", line, 0)
    return BENCHMARKS[m.group(1)]


def first_size(bench: Benchmark, sweep: Sweep, lo: int) -> int:
    """nccl-tests may round the first size down to its element count: lo or less."""
    return min(lo, sweep.rows[0]["size"])


def program(b: Benchmark, p: Program) -> list[str]:
    exe = f"{IMAGE_VIEW}/bin/{b.name}" if p.container else f"{p.home}/bin/{b.name}"
    return [exe, *p.size_args, *p.args]


def native(binaries: Any) -> str:
    raise BinaryNotFoundError("no native nccl-tests on this system: run it in the nccl-tests image "
                              "(environments: [nccl-tests]) or give the system an install")


def tags(environment: str) -> dict[str, Any]:
    """What the references select on: whether the aws-ofi-nccl hook of the image is on."""
    return {"aws_ofi_nccl_hook": not environment.endswith("no-awsofinccl")}


def stack(out: str, system: Any, step_tags: dict) -> tuple[dict, str | None]:
    """The net plugin NCCL used per node (its INFO lines), and the problem where the system requires
    another one."""
    nets = nccl_net(out)
    return {"nccl_net": nets}, nccl_plugin_problem(system.nccl_net_plugin, step_tags, nets)


def parse(text: str) -> list[Sweep]:
    return [parse_nccl(text)]


TOOL = Tool("nccl-tests", "nccl-tests", "nccl", "mpi", COLUMNS, "$NCCL_TESTS", program, parse, title,
            native=native, variables=(("NCCL_DEBUG", "INFO"),), gpus=True, tags=tags, stack=stack,
            printed_range=("minBytes", "maxBytes"), first_size=first_size)
SIZES = SizeFlags(lo_flags=("-b", "--minbytes"), hi_flags=("-e", "--maxbytes"), extra=("-f", "2"))
# no default sizes: nccl-tests prints the range it runs (minBytes, maxBytes); min_ranks 1: one rank may
# drive every GPU
BENCHMARKS: dict[str, Benchmark] = {
    name: Benchmark(name, TOOL, (name,), "oop_busbw_GBps", SIZES, min_ranks=1)
    for name in ("all_reduce_perf", "all_gather_perf", "alltoall_perf", "broadcast_perf", "reduce_perf",
                 "reduce_scatter_perf", "sendrecv_perf")}
