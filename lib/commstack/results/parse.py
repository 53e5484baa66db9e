"""Strict parsers for OSU micro-benchmarks (5.x-7.5), nccl-tests and mpi-pingpong output.

The header decides the columns. An unknown header, a row that does not fit, or text where a
row should be is a ParseError that quotes the line: never an empty result. Lines that the
dynamic loader or the launcher interleave (stderr folded into a console transcript) are known
by pattern and kept in `Sweep.noise`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from commstack.errors import ParseError, UnknownFormatError

# Lines that are not the benchmark's own output but appear in real transcripts (seed 000, 002).
NOISE = [
    re.compile(r".*: no version information available \(required by .*\)$"),
    re.compile(r"^srun: .*"),
    re.compile(r"^Nodes:\d+ Tasks:\d+ Per Node:\d+$"),  # job-script banner (seed 004)
]


@dataclass
class Sweep:
    """One benchmark's table: rows keyed by canonical column names."""

    tool: str  # osu | nccl-tests | mpi-pingpong
    benchmark: str  # osu_bw, all_reduce_perf, mpi-pingpong, ...
    title: str
    version: str | None
    device: str | None  # CUDA, ROCM, ... when the buffers are on a device
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # failure lines the benchmark printed
    noise: list[str] = field(default_factory=list)
    complete: bool | None = None  # None: the format has no end marker

    @property
    def sizes(self) -> list[int]:
        return [r["size"] for r in self.rows]

    def column(self, name: str) -> list[Any]:
        return [r[name] for r in self.rows]

    def row(self, size: int) -> dict[str, Any]:
        for r in self.rows:
            if r["size"] == size:
                return r
        raise KeyError(f"{self.benchmark}: no row for size {size}")

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in
                ("tool", "benchmark", "title", "version", "device", "columns", "rows", "meta", "errors", "noise",
                 "complete")}


def _number(text: str, line: str, lineno: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ParseError(f"not a number: {text!r}", line, lineno) from None
    if not math.isfinite(value):
        raise ParseError(f"non-finite value {text!r}", line, lineno)
    return value


def _size(text: str, line: str, lineno: int) -> int:
    if not text.isdigit():
        raise ParseError(f"message size {text!r} is not a byte count", line, lineno)
    return int(text)


def _is_noise(line: str) -> bool:
    return any(p.match(line) for p in NOISE)


# ---------------------------------------------------------------------------------------- OSU

OSU_TITLE = re.compile(r"^# OSU (?P<api>MPI-(?P<dev>CUDA|ROCM|OPENACC|SYCL)|MPI)[ _]?(?P<name>.+?) Test v(?P<ver>\d[\w.]*)\s*$")

# title (without "OSU MPI[-DEV]") -> benchmark executable
OSU_BENCHMARKS = {
    "latency": "osu_latency",
    "bandwidth": "osu_bw",
    "bi-directional bandwidth": "osu_bibw",
    "multiple bandwidth / message rate": "osu_mbw_mr",
    "multi latency": "osu_multi_lat",
    "put latency": "osu_put_latency",
    "get latency": "osu_get_latency",
    "put bandwidth": "osu_put_bw",
    "get bandwidth": "osu_get_bw",
    "put bi-directional bandwidth": "osu_put_bibw",
    "accumulate latency": "osu_acc_latency",
    "get_accumulate latency": "osu_get_acc_latency",
    "fetch_and_op latency": "osu_fop_latency",
    "compare_and_swap latency": "osu_cas_latency",
    "allreduce latency": "osu_allreduce",
    "all-to-all personalized exchange latency": "osu_alltoall",
    "all-to-allv personalized exchange latency": "osu_alltoallv",
    "allgather latency": "osu_allgather",
    "allgatherv latency": "osu_allgatherv",
    "broadcast latency": "osu_bcast",
    "reduce latency": "osu_reduce",
    "reduce_scatter latency": "osu_reduce_scatter",
    "gather latency": "osu_gather",
    "scatter latency": "osu_scatter",
    "barrier latency": "osu_barrier",
}

# header column text -> canonical name
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

OSU_META = [
    (re.compile(r"^# Datatype: (\S+?)\.?$"), lambda m: {"datatype": m.group(1)}),
    (re.compile(r"^# \[ pairs: (\d+) \] \[ window size: (\d+) \]$"),
     lambda m: {"pairs": int(m.group(1)), "window_size": int(m.group(2))}),
    (re.compile(r"^# Window creation: (\S+)$"), lambda m: {"window_creation": m.group(1)}),
    (re.compile(r"^# Synchronization: (\S+)$"), lambda m: {"synchronization": m.group(1)}),
    (re.compile(r"^# Send Buffer on (\w+) \((\w)\) and Receive Buffer on (\w+) \((\w)\)$"),
     lambda m: {"buffers": m.group(2) + m.group(4)}),
]


def parse_osu(text: str) -> list[Sweep]:
    """Every OSU table in `text` (a job may run several), in order."""
    sweeps: list[Sweep] = []
    preamble: list[str] = []
    cur: Sweep | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if _is_noise(line):
            (cur.noise if cur else preamble).append(line)
            continue
        m = OSU_TITLE.match(line)
        if m:
            name = m.group("name").strip().lower()
            bench = OSU_BENCHMARKS.get(name)
            if bench is None:
                raise UnknownFormatError(f"unknown OSU benchmark title {m.group('name')!r}", line, lineno)
            cur = Sweep("osu", bench, line[2:], m.group("ver"), m.group("dev"), [], noise=preamble)
            preamble = []
            sweeps.append(cur)
            continue
        if cur is None:
            raise UnknownFormatError("text before any OSU header", line, lineno)
        if "DATA VALIDATION ERROR" in line or line.startswith("# Error") or "Validation Failed" in line:
            cur.errors.append(line)
            continue
        if line.startswith("#"):
            for pattern, meta in OSU_META:
                mm = pattern.match(line)
                if mm:
                    cur.meta.update(meta(mm))
                    break
            else:
                if not line.startswith("# Size"):
                    raise UnknownFormatError("unknown OSU header line", line, lineno)
                if cur.rows or cur.columns:
                    raise ParseError("second column header in one OSU table", line, lineno)
                names = re.split(r"\s{2,}", line[1:].strip())
                unknown = [n for n in names if n.lower() not in OSU_COLUMNS]
                if unknown:
                    raise UnknownFormatError(f"unknown OSU column {unknown[0]!r}", line, lineno)
                cur.columns = [OSU_COLUMNS[n.lower()] for n in names]
            continue
        if not cur.columns:
            raise ParseError("data row before the OSU column header", line, lineno)
        fields = line.split()
        if len(fields) != len(cur.columns):
            raise ParseError(f"row has {len(fields)} fields, header {cur.columns} has {len(cur.columns)}", line,
                             lineno)
        row: dict[str, Any] = {}
        for col, val in zip(cur.columns, fields):
            if col == "size":
                row[col] = _size(val, line, lineno)
            elif col == "validation":
                if val not in ("Pass", "Fail"):
                    raise ParseError(f"validation is {val!r}, not Pass or Fail", line, lineno)
                row[col] = val
            elif col == "iterations":
                row[col] = int(_number(val, line, lineno))
            else:
                row[col] = _number(val, line, lineno)
        if cur.rows and row["size"] <= cur.rows[-1]["size"]:
            raise ParseError("message sizes do not increase", line, lineno)
        cur.rows.append(row)
    if not sweeps:
        raise UnknownFormatError("no OSU header found in the output")
    for s in sweeps:
        if not s.columns:
            raise ParseError(f"{s.benchmark}: header without a column line (output truncated?)")
    return sweeps


# ---------------------------------------------------------------------------------- nccl-tests

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
NCCL_COLUMNS = ["size", "count", "type", "redop", "root",
                "oop_time_us", "oop_algbw_GBps", "oop_busbw_GBps", "oop_wrong",
                "ip_time_us", "ip_algbw_GBps", "ip_busbw_GBps", "ip_wrong"]


def _nccl_params(line: str) -> dict[str, Any]:
    # "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: 20 ..."
    body = line[1:].replace(":", " ")
    body = re.sub(r"(\d+)\((\w+)\)", r"\1 \2", body)
    toks = body.split()
    out: dict[str, Any] = {}
    key: list[str] = []
    for tok in toks:
        if re.fullmatch(r"-?\d+", tok):
            out["_".join(key) or "value"] = int(tok)
            key = []
        elif tok in ("factor", "bytes") and out:
            out["step_kind"] = tok
        else:
            key.append(tok)
    return out


def parse_nccl(text: str) -> Sweep:
    sweep: Sweep | None = None
    preamble: list[str] = []
    header_seen = False
    in_devices = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if _is_noise(line):
            (sweep.noise if sweep else preamble).append(line)
            continue
        m = NCCL_START.match(line)
        if m:
            sweep = Sweep("nccl-tests", m.group(1), line[2:], None, "CUDA", [], noise=preamble)
            sweep.meta["devices"] = []
            sweep.complete = False
            continue
        if sweep is None:
            raise UnknownFormatError("text before '# Collective test starting'", line, lineno)
        if sweep.complete:
            raise ParseError("output after '# Collective test concluded'", line, lineno)
        if (m := NCCL_END.match(line)):
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
                raise ParseError("device line outside '# Using devices'", line, lineno)
            d = m.groupdict()
            sweep.meta["devices"].append({"rank": int(d["rank"]), "host": d["host"], "device": int(d["device"]),
                                          "pci": d["pci"], "name": d["name"].strip()})
            continue
        if (m := NCCL_OOB.match(line)):
            sweep.meta["out_of_bounds"] = int(m.group(1))
            sweep.meta["out_of_bounds_ok"] = m.group(2) == "OK"
            continue
        if (m := NCCL_AVG.match(line)):
            sweep.meta["avg_busbw_GBps"] = _number(m.group(1), line, lineno)
            continue
        if line.startswith("#"):
            toks = line[1:].split()
            if not toks:
                in_devices = False
                continue
            if toks == NCCL_HEADER:
                header_seen = True
                sweep.columns = list(NCCL_COLUMNS)
                continue
            if toks in (["out-of-place", "in-place"], ["(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "(us)",
                                                       "(GB/s)", "(GB/s)"]):
                continue
            if "NCCL" in line or "Bad" in line or "FAILED" in line or "error" in line.lower():
                sweep.errors.append(line)
                continue
            raise UnknownFormatError("unknown nccl-tests header line", line, lineno)
        if "NCCL WARN" in line or "NCCL INFO" in line:
            sweep.noise.append(line)  # NCCL_DEBUG output interleaved on stdout
            continue
        if re.match(r"^\S+:\d+:\d+ \[\d+\] .*(failure|error|Error)", line) or "Test NCCL failure" in line \
                or "Test CUDA failure" in line:
            sweep.errors.append(line)
            continue
        if not header_seen:
            raise ParseError("data row before the nccl-tests column header", line, lineno)
        fields = line.split()
        if len(fields) != len(NCCL_COLUMNS):
            raise ParseError(f"row has {len(fields)} fields, nccl-tests rows have {len(NCCL_COLUMNS)}", line, lineno)
        row: dict[str, Any] = {}
        for col, val in zip(NCCL_COLUMNS, fields):
            if col in ("size", "count"):
                row[col] = _size(val, line, lineno)
            elif col in ("type", "redop"):
                row[col] = val
            elif col == "root":
                row[col] = int(_number(val, line, lineno))
            elif col.endswith("_wrong"):
                row[col] = None if val == "N/A" else int(_number(val, line, lineno))
            else:
                row[col] = _number(val, line, lineno)
        if sweep.rows and row["size"] <= sweep.rows[-1]["size"]:
            raise ParseError("message sizes do not increase", line, lineno)
        sweep.rows.append(row)
    if sweep is None:
        raise UnknownFormatError("no '# Collective test starting' line: not nccl-tests output")
    return sweep


# ---------------------------------------------------------------------------------- mpi-pingpong

PP_HEADER = re.compile(r"^# mpi-pingpong v(?P<ver>\S+) mode=(?P<mode>\S+) ranks=2 loops=(?P<loops>\d+) "
                       r"warmup=(?P<warmup>\d+) min=(?P<min>\d+) max=(?P<max>\d+)$")
PP_ROW = re.compile(r"^Transfer size \(B\):\s*(?P<size>\d+), Transfer Time \(s\):\s*(?P<time>\S+), "
                    r"Bandwidth \(GB/s\):\s*(?P<bw>\S+?)(?:, Check: (?P<check>Pass|Fail))?$")
PP_END = re.compile(r"^# mpi-pingpong done: (.*)$")


def parse_pingpong(text: str) -> Sweep:
    """Our mpi-pingpong, and the OLCF tutorial program it follows (no header, no check column)."""
    sweep = Sweep("mpi-pingpong", "mpi-pingpong", "mpi-pingpong", None, None,
                  ["size", "time_s", "bandwidth_GiBps"])
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or _is_noise(line):
            continue
        if (m := PP_HEADER.match(line)):
            if sweep.rows or sweep.version:
                raise ParseError("header after the first row", line, lineno)
            sweep.version = m.group("ver")
            sweep.meta.update(mode=m.group("mode"), loops=int(m.group("loops")), warmup=int(m.group("warmup")),
                              min=int(m.group("min")), max=int(m.group("max")))
            sweep.device = None if m.group("mode") == "cpu" else "CUDA"
            sweep.columns.append("check")
            sweep.complete = False
            continue
        if (m := PP_END.match(line)):
            sweep.complete = True
            sweep.meta["summary"] = m.group(1)
            continue
        if line.startswith("DATA VALIDATION ERROR"):
            sweep.errors.append(line)
            continue
        if (m := PP_ROW.match(line)):
            if sweep.complete:
                raise ParseError("row after the end line", line, lineno)
            if (m.group("check") is None) != ("check" not in sweep.columns):
                raise ParseError("check column does not match the header", line, lineno)
            row = {"size": int(m.group("size")), "time_s": _number(m.group("time"), line, lineno),
                   "bandwidth_GiBps": _number(m.group("bw"), line, lineno)}
            if m.group("check"):
                row["check"] = m.group("check")
            if sweep.rows and row["size"] <= sweep.rows[-1]["size"]:
                raise ParseError("message sizes do not increase", line, lineno)
            sweep.rows.append(row)
            continue
        raise UnknownFormatError("not an mpi-pingpong line", line, lineno)
    if not sweep.rows and sweep.version is None:
        raise UnknownFormatError("no mpi-pingpong header or row in the output")
    if sweep.complete and sweep.meta.get("max") and sweep.rows and sweep.rows[-1]["size"] * 2 <= sweep.meta["max"]:
        raise ParseError(f"end line after {sweep.rows[-1]['size']} B but the sweep goes to {sweep.meta['max']} B")
    return sweep


PARSERS = {"osu": lambda text: parse_osu(text)[0], "nccl-tests": parse_nccl, "mpi-pingpong": parse_pingpong}


def parse(tool: str, text: str) -> Sweep:
    try:
        parser = PARSERS[tool]
    except KeyError:
        raise UnknownFormatError(f"no parser for {tool!r}; known: {', '.join(PARSERS)}") from None
    return parser(text)
