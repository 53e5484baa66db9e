"""Strict parsers for OSU micro-benchmarks (5.x-7.5), nccl-tests and mpi-pingpong output.

The title line tells the benchmark (commstack.benchmarks), its header the columns. Every line is
the benchmark's own, a known warning (kept in `Sweep.warnings`, also when it is glued to the
start or end of another line, which then still counts), or an error naming its kind
(commstack.errors.PARSE_ERRORS) and quoting the line: Slurm's own reason for ending a step is
`timed-out` or `node-failure`, a launcher error, an MPI abort or a signal is `crashed`, never
noise; the benchmark's own failed data check comes before the crash lines that follow it.
`parse_output` is what the runner and `commstack parse` call: it also checks that the sweep has
the first and last sizes its arguments (or the benchmark's defaults) ask for, and the benchmark's
own validation.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commstack import benchmarks
from commstack.benchmarks import BY_TITLE, COLUMNS, Benchmark
from commstack.files import MAX_OUTPUT, read_bounded
from commstack.errors import (PARSE_ERRORS, BadNumberError, CommstackError, CrashedError, EmptyOutputError,
                              NodeFailedError, ParseError, TimedOutError, TruncatedError, UnknownFormatError,
                              ValidationFailedError, cut, printable)


@dataclass
class Sweep:
    """One benchmark's table: rows keyed by canonical column names (commstack.benchmarks.COLUMNS)."""

    tool: str  # osu | nccl-tests | mpi-pingpong
    benchmark: str  # osu_bw, all_reduce_perf, mpi-pingpong, ...
    title: str
    version: str | None
    device: str | None  # CUDA, ROCM, ... when the buffers are on a device
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # known lines that are not the benchmark's
    complete: bool | None = None  # the format's own end marker was seen; None: the format has none
    # (lineno, line) of each row, of each failure line the benchmark printed, and of the title
    row_lines: list[tuple[int, str]] = field(default_factory=list, repr=False)
    error_lines: list[tuple[int, str]] = field(default_factory=list, repr=False)
    title_line: tuple[int, str] = (0, "")

    @property
    def errors(self) -> list[str]:
        return [line for _, line in self.error_lines]

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


# ------------------------------------------------------------------------------- shared lines

# A launcher error line, an MPI abort or a signal, anywhere in a line: a rank died.
CRASH = re.compile(
    r"srun: error: |srun: Terminating StepId=|srun: Job step aborted|srun: forcing job termination"
    r"|slurmstepd(?:-\S+)?: error: |\*\*\* Process received signal \*\*\*|exited on signal \d+"
    r"|\b(?:Segmentation fault|Bus error|Floating point exception|Illegal instruction)\b"
    r"|application called MPI_Abort|MPI_ABORT was invoked on rank \d+|\*\*\* An error occurred in MPI_\w+"
    r"|\*\*\* MPI_ERRORS_ARE_FATAL"
    r"|BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
    r"|^(?:Killed|Aborted)(?: \(core dumped\))?$|Test (?:NCCL|CUDA) failure")
# mpirun's word that a rank exited non-zero: a crash too, told only where no line above says more
EXITED = re.compile(r"returned\s+a non-zero exit code"
                    r"|^Primary job\s+terminated normally, but \d+ process(?:es)? returned$"
                    r"|^mpirun detected that one or more processes exited with non-zero status")
# The benchmark's own word that its data check failed: OSU 7.x (`DATA VALIDATION ERROR: <path> exited
# with status 1 on message size 64.`, after a Fail row, then it exits 1) and mpi-pingpong print it
VALIDATION_ERROR = re.compile(r"^DATA VALIDATION ERROR: ")
# a Fail row (OSU: Fail or failed in the last column; mpi-pingpong: Check: Fail; nccl-tests: wrong
# elements out of place or in place, out-of-bounds values), or that line
VALIDATION_FAILED = re.compile(r"^DATA VALIDATION ERROR: |^\d+\s.*\s(?:Fail|failed)$|, Check: Fail$"
                               r"|^\s*\d+\s+\d+\s+\w+\s+\w+\s+-?\d+(?:\s+\S+){3}\s+"
                               r"(?:[1-9]\d*(?:\s+\S+){4}|(?:\S+\s+){4}[1-9]\d*)$"
                               r"|^# Out of bounds values : \d+ FAILED$")
# Why Slurm ended a step, wherever it stands among the crash lines that follow from it
# (slurmstepd-<node>: error: *** STEP 1.3 ON node1 CANCELLED AT ... DUE TO NODE FAILURE, SEE SLURMCTLD LOG ... ***)
SLURM_ENDED = [(re.compile(r"DUE TO NODE FAILURE|^srun: error: Node failure on \S+$"), NodeFailedError,
                "Slurm ended the step: a node failed"),
               (re.compile(r"DUE TO TIME LIMIT"), TimedOutError, "Slurm ended the step at its time limit")]

# Warnings with a known end, stripped where they are glued to the start or end of a line.
# OSU's mem-limit warning has no newline, so it always glues onto the next line (2>&1).
GLUED = [
    re.compile(r"(?:(?<!\S)\.{1,2})?/[^\s()]*: (?:\.{1,2})?/[^\s()]*: no version information available "
               r"\(required by /[^\s()]*\)"),
    re.compile(r"Warning! Limiting max message size to: ?(?P<limit>\d+)\.? ?"
               r"Increase -M, --mem-limit for higher message sizes\."),
]
# Warnings that run to the end of their line: known only as whole lines.
WHOLE = [
    re.compile(r"\[\d+\.\d+\] \[[^\]]+\] +\S+:\d+ +UCX +WARN .*"),
    re.compile(r"libfabric:\d+:\d+:[^<]*<warn> .*"),
    re.compile(r"\S+:\d+:\d+ \[\d+\] NCCL (?:INFO|WARN) .*"),
    re.compile(r"srun: (?:warning: .*|job \d+ queued and waiting for resources|job \d+ has been allocated resources"
               r"|Job step created|Step created for StepId=\S+)"),
    re.compile(r"Nodes:\d+ Tasks:\d+ Per Node:\d+"),  # job-script banner (seed 004)
]
# a whole-line warning whose text ends like a table row may have swallowed one
ROW_TAIL = re.compile(r"(?:^|\s)\d+(?:\s+(?:[-+]?[\d.]+(?:[eE][-+]?\d+)?|Pass|Fail|passed|failed)){1,12}\s*$")
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]\d+)?")  # as printf writes them: 1.5, -1, 1.9164e+03
# a field of a table row: a number, a Pass/Fail word, or nccl-tests' type, op, root and N/A
ROW_FIELD = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|Pass|Fail|passed|failed|N/A|Transfer|[a-z]+\d*")
OSU_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # OSU prints %.2f: no sign, no exponent


@dataclass
class _Text:
    """The benchmark's own lines of an output, with the known warnings taken out."""

    lines: list[tuple[int, str]]
    warnings: list[tuple[int, str]]
    cut: bool  # the output does not end with a newline: its last line may be cut short
    mem_limit: int | None = None  # OSU's "Limiting max message size to: N"


def _own_lines(text: str) -> _Text:
    if not text.strip():
        raise EmptyOutputError("the output is empty")
    out = _Text([], [], not text.endswith("\n"))
    lines = [line.rstrip() for line in text.splitlines()]
    exited: tuple[int, str] | None = None
    # the benchmark's failed data check comes first: the crash lines after it are its consequence
    failed = next(((n, line) for n, line in enumerate(lines, 1) if VALIDATION_FAILED.search(line)), None)

    def ended(error: type[ParseError], message: str, line: str, lineno: int) -> ParseError:
        if failed:
            return ValidationFailedError(f"the benchmark's data check failed, then: {message}", failed[1], failed[0])
        return error(message, line, lineno)
    for pattern, error, message in SLURM_ENDED:
        for lineno, line in enumerate(lines, 1):
            if pattern.search(line):
                raise ended(error, message, line, lineno)
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if CRASH.search(line):
            raise ended(CrashedError, "a launcher error line, an MPI abort or a signal: a rank died", line, lineno)
        if EXITED.search(line):
            exited = exited or (lineno, line)
        for pattern in GLUED:
            for m in list(pattern.finditer(line)):
                out.warnings.append((lineno, cut(m.group(0))))
                if m.groupdict().get("limit"):
                    out.mem_limit = int(m.group("limit"))
            line = pattern.sub("", line).rstrip()
        if not line.strip():
            continue
        if any(p.fullmatch(line) for p in WHOLE):
            if ROW_TAIL.search(line):
                raise UnknownFormatError("a warning line ends like a table row: a row may be glued to it", line,
                                         lineno)
            out.warnings.append((lineno, cut(line)))
            continue
        out.lines.append((lineno, line))
    if exited:
        raise ended(CrashedError, "the launcher says a rank exited with a non-zero status", exited[1], exited[0])
    if not out.lines:
        raise EmptyOutputError(f"no benchmark output, only {len(out.warnings)} warning line(s)",
                               out.warnings[0][1], out.warnings[0][0])
    return out


def _number(text: str, line: str, lineno: int, pattern: re.Pattern = NUMBER) -> float:
    if not pattern.fullmatch(text):
        raise BadNumberError(f"not a number: {text!r}", line, lineno)
    value = float(text)
    if not math.isfinite(value):
        raise BadNumberError(f"non-finite value {text!r}", line, lineno)
    return value


def _count(text: str, line: str, lineno: int) -> int:
    if not text.isascii() or not text.isdigit():
        raise BadNumberError(f"{text!r} is not a count", line, lineno)
    return int(text)


def _assign_warnings(sweeps: list[Sweep], t: _Text) -> None:
    """Each warning to the table it appears in (those before the first title to the first)."""
    # a table starts at its title; a datatype table of 7.x -T all (same title) at its first row
    starts = [-1] + [s.row_lines[0][0] if s.title_line == p.title_line else s.title_line[0]
                     for p, s in zip(sweeps, sweeps[1:])] + [math.inf]
    for i, s in enumerate(sweeps):
        s.warnings = [w for n, w in t.warnings if starts[i] <= n < starts[i + 1]]


def _check_last_line(t: _Text, sweeps: list[Sweep]) -> None:
    """A last row without its newline may have been cut inside a number: the programs end every row."""
    last = t.lines[-1]
    if t.cut and any(s.row_lines and s.row_lines[-1] == last for s in sweeps):
        raise TruncatedError("the output ends inside its last row (no newline after it)", last[1], last[0])


def _cut_number(t: _Text, e: BadNumberError) -> ParseError:
    """A number that is none on the last line, without its newline (`6374.`): the output was cut there."""
    if t.cut and e.lineno == t.lines[-1][0]:
        return TruncatedError(f"the output ends mid-row ({e.message})", e.line, e.lineno)
    return e


def _cut_row(t: _Text, lineno: int, line: str, message: str, want: int | None = None) -> ParseError:
    """A row that does not fit: cut short when it is the last line, has no newline and starts like a
    row; text glued to a whole row (`want` fields) when the row is there; else a format error."""
    fields = line.split()
    if want and len(fields) > want:
        for where, row, rest in (("end", fields[:want], line.split(None, want)[-1]),
                                 ("start", fields[-want:], line.rsplit(None, want)[0])):
            if all(ROW_FIELD.fullmatch(f) for f in row):
                return UnknownFormatError(f"text glued to the {where} of a row: {rest.strip()!r}", line, lineno)
    if lineno == t.lines[-1][0] and t.cut and ROW_FIELD.fullmatch(fields[0]):
        return TruncatedError(f"the output ends mid-row ({message})", line, lineno)
    return UnknownFormatError(message, line, lineno)


# ---------------------------------------------------------------------------------------- OSU

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


def osu_title(line: str) -> tuple[Benchmark, re.Match] | None:
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


def _osu_tables(t: _Text) -> list[Sweep]:
    sweeps: list[Sweep] = []
    cur: Sweep | None = None
    for lineno, line in t.lines:
        try:
            titled = osu_title(line)
        except UnknownFormatError as e:
            raise UnknownFormatError(e.message, line, lineno) from None
        if titled:
            bench, m = titled
            if cur and not cur.columns and not cur.meta and line == cur.title_line[1]:
                continue  # 7.2 osu_mbw_mr prints its title twice
            cur = Sweep("osu", bench.name, line[2:], m.group("ver"), m.group("dev"), [],
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
                        cur = Sweep("osu", cur.benchmark, cur.title, cur.version, cur.device, [], meta=dict(cur.meta),
                                    title_line=cur.title_line)
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
                if (cols[0] == "size") != benchmarks.get(cur.benchmark).sized:
                    raise UnknownFormatError(f"{cur.benchmark} has {'a' if cols[0] != 'size' else 'no'} size "
                                             f"column", line, lineno)
                # barrier has no size column: its one row is size 0
                cur.columns = cols if cols[0] == "size" else ["size", *cols]
                first = next(s for s in sweeps if s.title_line == cur.title_line)
                if first is not cur and benchmarks.get(cur.benchmark).directory == "pt2pt":
                    # 7.2 -T all: a point-to-point test heads its second and later datatypes with the
                    # collectives' header (`# Size  Avg Latency(us)`, for osu_bw and osu_mbw_mr too);
                    # their rows are the first table's columns
                    cur.columns = first.columns
            continue
        if not cur.columns:
            raise UnknownFormatError("data row before the OSU column header", line, lineno)
        fields = line.split()
        sized = benchmarks.get(cur.benchmark).sized
        want = len(cur.columns) - (0 if sized else 1)
        if len(fields) != want:
            raise _cut_row(t, lineno, line, f"row has {len(fields)} fields, the header {want}", want)
        if not fields[0][0].isdigit():  # a row starts with its size (barrier: its latency)
            raise UnknownFormatError("not a row of the table: it does not start with a number", line, lineno)
        values = fields if sized else ["0", *fields]
        row: dict[str, Any] = {}
        for col, val in zip(cur.columns, values):
            if col in ("size", "iterations"):
                row[col] = _count(val, line, lineno)
            elif col == "validation":
                if val not in OSU_VALIDATION:
                    raise _cut_row(t, lineno, line, f"validation is {val!r}, not {' or '.join(OSU_VALIDATION)}")
                row[col] = OSU_VALIDATION[val]
            else:
                row[col] = _number(val, line, lineno, OSU_NUMBER)
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
    t = _own_lines(text)
    try:
        sweeps = _osu_tables(t)
    except BadNumberError as e:
        raise _cut_number(t, e) from None
    _check_last_line(t, sweeps)
    _assign_warnings(sweeps, t)
    if t.mem_limit:
        for s in sweeps:
            s.meta["mem_limit"] = t.mem_limit
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
    t = _own_lines(text)
    try:
        return _nccl_table(t)
    except BadNumberError as e:
        raise _cut_number(t, e) from None


def _nccl_table(t: _Text) -> Sweep:
    sweep: Sweep | None = None
    in_devices = False
    for lineno, line in t.lines:
        m = NCCL_START.match(line)
        if m:
            if sweep is not None:
                raise UnknownFormatError("a second nccl-tests run in one output", line, lineno)
            if m.group(1) not in benchmarks.BENCHMARKS:
                raise UnknownFormatError("unknown nccl-tests benchmark", line, lineno)
            sweep = Sweep("nccl-tests", m.group(1), line[2:], None, "CUDA", [], title_line=(lineno, line))
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
            sweep.meta["avg_busbw_GBps"] = _number(m.group(1), line, lineno)
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
            raise _cut_row(t, lineno, line, f"row has {len(fields)} fields, nccl-tests rows have {len(NCCL_COLUMNS)}",
                           len(NCCL_COLUMNS))
        row: dict[str, Any] = {}
        for col, val in zip(NCCL_COLUMNS, fields):
            if col in ("size", "count"):
                row[col] = _count(val, line, lineno)
            elif col in ("type", "redop"):
                row[col] = val
            elif col == "root":
                row[col] = int(_number(val, line, lineno))
            elif col.endswith("_wrong"):
                row[col] = None if val == "N/A" else _count(val, line, lineno)
            else:
                row[col] = _number(val, line, lineno)
        if sweep.rows and row["size"] <= sweep.rows[-1]["size"]:
            raise UnknownFormatError("message sizes do not increase", line, lineno)
        if row["oop_wrong"] or row["ip_wrong"]:
            sweep.error_lines.append((lineno, line))
        sweep.rows.append(row)
        sweep.row_lines.append((lineno, line))
    if not sweep.rows:  # (sweep is set: a first line that does not start the run is an error above)
        raise TruncatedError("the output ends before the first row", *t.lines[-1][::-1])
    _check_last_line(t, [sweep])
    _assign_warnings([sweep], t)
    return sweep


# ---------------------------------------------------------------------------------- mpi-pingpong

PP_HEADER = re.compile(r"^# mpi-pingpong v(?P<ver>\S+) mode=(?P<mode>\S+) ranks=2 loops=(?P<loops>\d+) "
                       r"warmup=(?P<warmup>\d+) min=(?P<min>\d+) max=(?P<max>\d+)$")
PP_ROW = re.compile(r"^Transfer size \(B\):\s*(?P<size>\S+), Transfer Time \(s\):\s*(?P<time>\S+), "
                    r"Bandwidth \(GB/s\):\s*(?P<bw>\S+?)(?:, Check: (?P<check>\S+))?$")
PP_END = re.compile(r"^# mpi-pingpong done: (data check FAILED|all sizes passed)$")


def parse_pingpong(text: str) -> Sweep:
    """Our mpi-pingpong, and the OLCF tutorial program it follows (no header, no check column)."""
    t = _own_lines(text)
    try:
        return _pingpong_table(t)
    except BadNumberError as e:
        raise _cut_number(t, e) from None


def _pingpong_table(t: _Text) -> Sweep:
    sweep = Sweep("mpi-pingpong", "mpi-pingpong", "mpi-pingpong", None, None,
                  ["size", "time_s", "bandwidth_GiBps"], title_line=t.lines[0])
    for lineno, line in t.lines:
        if (m := PP_HEADER.match(line)):
            if sweep.rows or sweep.version:
                raise UnknownFormatError("header after the first row", line, lineno)
            sweep.version = m.group("ver")
            sweep.meta.update(mode=m.group("mode"), loops=int(m.group("loops")), warmup=int(m.group("warmup")),
                              min=int(m.group("min")), max=int(m.group("max")))
            sweep.device = None if m.group("mode") == "cpu" else "CUDA"
            sweep.columns.append("check")
            sweep.complete = False
            continue
        if sweep.complete:
            raise UnknownFormatError("output after the end line", line, lineno)
        if (m := PP_END.match(line)):
            sweep.complete = True
            sweep.meta["summary"] = m.group(1)
            continue
        if VALIDATION_ERROR.match(line):
            sweep.error_lines.append((lineno, line))
            continue
        if (m := PP_ROW.match(line)):
            if (m.group("check") is None) != ("check" not in sweep.columns):
                raise UnknownFormatError("check column does not match the header", line, lineno)
            row = {"size": _count(m.group("size"), line, lineno), "time_s": _number(m.group("time"), line, lineno),
                   "bandwidth_GiBps": _number(m.group("bw"), line, lineno)}
            if m.group("check"):
                if m.group("check") not in ("Pass", "Fail"):
                    raise _cut_row(t, lineno, line, f"check is {m.group('check')!r}, not Pass or Fail")
                row["check"] = m.group("check")
            if sweep.rows and row["size"] != sweep.rows[-1]["size"] * 2:
                raise UnknownFormatError(f"size {row['size']} after {sweep.rows[-1]['size']}: the sweep doubles "
                                         f"the size, so rows are missing or out of order", line, lineno)
            sweep.rows.append(row)
            sweep.row_lines.append((lineno, line))
            continue
        if line.startswith("Transfer size (B):"):
            raise _cut_row(t, lineno, line, "not a complete mpi-pingpong row")
        raise UnknownFormatError("not an mpi-pingpong line", line, lineno)
    if not sweep.rows:
        raise TruncatedError("the output ends before the first row", *t.lines[-1][::-1])
    _check_last_line(t, [sweep])
    _assign_warnings([sweep], t)
    return sweep


# ------------------------------------------------------------------------- identify and check


def identify(text: str) -> Benchmark:
    """The benchmark whose output `text` is, from its first own line (the title)."""
    lineno, line = _own_lines(text).lines[0]
    if (m := NCCL_START.match(line)):
        return benchmarks.get(m.group(1)) if m.group(1) in benchmarks.BENCHMARKS else _unknown(line, lineno)
    if PP_HEADER.match(line) or PP_ROW.match(line):
        return benchmarks.get("mpi-pingpong")
    try:
        titled = osu_title(line)
    except UnknownFormatError as e:
        raise UnknownFormatError(e.message, line, lineno) from None
    if titled:
        return titled[0]
    if OSU_USAGE.match(line):
        raise UnknownFormatError("OSU printed its usage: it does not take these options", line, lineno)
    raise UnknownFormatError("no benchmark title: not OSU, nccl-tests or mpi-pingpong output", line, lineno)


def _unknown(line: str, lineno: int) -> Benchmark:
    raise UnknownFormatError("unknown nccl-tests benchmark", line, lineno)


def parse_tables(text: str, tool: str | None = None) -> list[Sweep]:
    """Every table of one tool's output, `tool` (osu, nccl-tests, mpi-pingpong) told by the title
    when None; no completeness check (see parse_output)."""
    tool = tool or identify(text).tool
    if tool == "osu":
        return parse_osu(text)
    if tool == "nccl-tests":
        return [parse_nccl(text)]
    return [parse_pingpong(text)]


def expected_sizes(bench: Benchmark, sweep: Sweep, args: list[str], ranks: int | None = None) -> tuple[int, int]:
    """(lo, hi) that `args`, or the benchmark's defaults for this output's version, ask for."""
    lo, hi = bench.sizes.requested(args)
    if bench.tool == "osu" and lo is not None and lo <= 0:
        lo = None  # OSU refuses a minimum of 0 and keeps its default
    # nccl-tests and mpi-pingpong print the range they run: where the arguments give none
    printed = {"nccl-tests": ("minBytes", "maxBytes"), "mpi-pingpong": ("min", "max")}.get(bench.tool, ())
    if printed and printed[0] in sweep.meta:
        return (sweep.meta[printed[0]] if lo is None else lo), (sweep.meta[printed[1]] if hi is None else hi)
    if lo is None or hi is None:
        default = bench.defaults(sweep.version)
        if default is None:
            raise UnknownFormatError(f"{bench.name} v{sweep.version}: its default sizes are not known here; "
                                     f"give its size arguments ({' '.join(bench.sizes.args('LO', 'HI'))})",
                                     *sweep.title_line[::-1])
        lo = default[0] if lo is None else lo
        hi = default[1] if hi is None else hi
    if bench.mem_limit_per_rank:
        limit = bench.mem_limit(args)
        if ranks:
            hi = min(hi, limit // ranks)  # OSU's check_mem_limit: 5.x silently, 7.x with a warning
        if sweep.meta.get("mem_limit"):
            hi = min(hi, sweep.meta["mem_limit"])
    return lo, hi


def first_size(bench: Benchmark, sweep: Sweep, lo: int) -> int:
    """The size the sweep's first row has: `lo` as the benchmark's loop rounds it (OSU: by the
    datatype of its `# Datatype:` line); nccl-tests may round it to its element count, so lo or less."""
    if bench.tool == "nccl-tests":
        return min(lo, sweep.rows[0]["size"])
    datatype = sweep.meta.get("datatype")  # 5.x prints none, and counts bytes from 0 up
    if datatype and datatype not in benchmarks.DATATYPE_BYTES:
        raise UnknownFormatError(f"{bench.name}: datatype {datatype} of unknown size", *sweep.title_line[::-1])
    return bench.first_size(sweep.version, lo, benchmarks.DATATYPE_BYTES.get(datatype, 0))


def check(bench: Benchmark, sweep: Sweep, args: list[str], ranks: int | None = None) -> None:
    """Raise the first problem of a parsed sweep: failed validation, or missing sizes."""
    if sweep.error_lines:
        lineno, line = sweep.error_lines[0]
        raise ValidationFailedError(f"{bench.name}: the benchmark's data check failed", line, lineno)
    for (lineno, line), row in zip(sweep.row_lines, sweep.rows):
        if row.get("validation") == "Fail" or row.get("check") == "Fail":
            raise ValidationFailedError(f"{bench.name}: data validation failed at {row['size']} B", line, lineno)
    last_lineno, last_line = sweep.row_lines[-1]
    if sweep.complete is False:
        raise TruncatedError(f"{bench.name}: the output ends before the benchmark's end line", last_line,
                             last_lineno)
    lo, hi = expected_sizes(bench, sweep, args, ranks)
    last = sweep.rows[-1]["size"]
    if sweep.meta.get("step_kind") == "bytes":  # nccl-tests -i: linear steps
        following = last + sweep.meta["step"]
    else:
        following = last * sweep.meta.get("step", 2) if last else 1
    first = sweep.rows[0]["size"]
    want = first_size(bench, sweep, lo)
    if bench.sized and first > want:
        raise TruncatedError(f"{bench.name}: the sweep starts at {first} B; {want} B comes first in the {lo}..{hi} B "
                             f"asked for: rows are missing", *sweep.row_lines[0][::-1])
    if bench.sized and first < want:
        raise UnknownFormatError(f"{bench.name}: the sweep starts at {first} B, below the {want} B its arguments ask "
                                 f"for: the output of other arguments", *sweep.row_lines[0][::-1])
    if bench.sized and last > hi:
        raise UnknownFormatError(f"{bench.name}: the sweep goes on to {last} B, past the {lo}..{hi} B its arguments "
                                 f"ask for: the output of other arguments", last_line, last_lineno)
    if bench.sized and last < hi and following <= hi:
        raise TruncatedError(f"{bench.name}: the sweep stops at {last} B; the next size, {following} B, is within "
                             f"the {lo}..{hi} B asked for", last_line, last_lineno)


def parse_outputs(text: str, args: list[str], ranks: int | None = None) -> list[Sweep]:
    """Every table of one run's output (several only with OSU 7.x `-T all`, one per datatype, or a
    job script's transcript), each checked against `args` as in parse_output."""
    bench = identify(text)
    sweeps = parse_tables(text, bench.tool)
    for s in sweeps:
        check(benchmarks.get(s.benchmark), s, args, ranks)
    return sweeps


def parse_output(benchmark: str | None, text: str, args: list[str], ranks: int | None = None) -> Sweep:
    """One step's output (stdout decoded with errors="replace"), parsed and checked: the sweep is
    complete against `args` (the benchmark's own options; its defaults where they give no sizes)
    and valid, or a ParseError subclass names the kind and quotes the line. `benchmark`: the one
    the step ran (None: the title tells). `ranks` lets the check know where OSU's memory limit
    shortens a collective's sweep."""
    if benchmark is not None:
        lineno, line = _own_lines(text).lines[0]
        if identify(text).name != benchmark:
            raise UnknownFormatError(f"expected {benchmark} output, the title is another benchmark's", line, lineno)
    sweeps = parse_outputs(text, args, ranks)
    if len(sweeps) > 1:
        raise UnknownFormatError(f"{len(sweeps)} tables in one output; a step runs one", *sweeps[1].title_line[::-1])
    return sweeps[0]


def validation_failure(benchmark: str, text: str, args: list[str], ranks: int | None = None) \
        -> ValidationFailedError | None:
    """The benchmark's own report, in its stdout, that its data check failed; None where it has none.
    A step that exited non-zero after one (OSU 7.x `-c` exits 1) failed validation: the exit followed."""
    try:
        parse_output(benchmark, text, args, ranks)
    except ValidationFailedError as e:
        return ValidationFailedError(f"{e.message}; the step then exited non-zero", e.line, e.lineno)
    except ParseError:
        return None
    return None


# ------------------------------------------------------------------------------ commstack parse

PARSE_HELP = "exit status: 0 complete and valid; " + "; ".join(
    f"{e.exit_code} {e.kind}" for e in PARSE_ERRORS) + "; 2 bad arguments or unreadable FILE"


def describe(sweep: Sweep) -> dict[str, Any]:
    """What `commstack parse --json` prints for one table."""
    return {"benchmark": sweep.benchmark, "tool": sweep.tool, "version": sweep.version, "title": sweep.title,
            "device": sweep.device, "columns": [{"name": c, "unit": COLUMNS[c].unit} for c in sweep.columns],
            "rows": sweep.rows, "meta": sweep.meta, "warnings": sweep.warnings}


def parse_command(path: str, args: str, as_json: bool, ranks: int | None) -> int:
    """`commstack parse FILE`: parse and check any run's output; print the rows or the error."""
    text = read_bounded(Path(path), MAX_OUTPUT).decode(errors="replace")  # a regular file, at most 64 MiB
    if ranks is not None and ranks < 1:
        raise CommstackError(f"--ranks {ranks}: a run has 1 rank or more")
    try:
        argv = shlex.split(args)
    except ValueError as e:
        raise CommstackError(f"--args {args!r}: {e}") from None
    try:
        sweeps = parse_outputs(text, argv, ranks)
    except ParseError as e:
        print(f"commstack parse: {path}: {e.kind}: {e.message}", file=sys.stderr)
        if e.line is not None:
            print(f"  line {e.lineno}: {printable(e.line)}", file=sys.stderr)
        return e.exit_code
    if as_json:
        print(json.dumps([describe(s) for s in sweeps] if len(sweeps) > 1 else describe(sweeps[0]), indent=1))
    else:
        for s in sweeps:
            print(f"{s.benchmark} ({s.title}): {len(s.rows)} rows, {s.rows[0]['size']}..{s.rows[-1]['size']} B, "
                  f"complete and valid" + (f"; {len(s.warnings)} warning line(s)" if s.warnings else ""))
    return 0
