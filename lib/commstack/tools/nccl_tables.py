"""How nccl-tests and rccl-tests print a run, read line by line into tables (commstack.tools.nccl_tests
holds the tool and the table of formats by version that this follows)."""

from __future__ import annotations

import re
from typing import Any, Container

from commstack.errors import BadNumberError, TruncatedError, UnknownFormatError
from commstack.tools.base import Column
from commstack.tools.lines import Quoted, Sweep, Text, count, cut_row, number

VERSION = re.compile(r"^# (?P<fork>nccl|rccl)-tests version (?P<version>\S+)(?: \((?P<commit>[0-9a-f]+)\))?"
                     r" (?:nccl|rccl)-headers=(?P<headers>\d+) (?:nccl|rccl)-library=(?P<library>\d+)$")
RCCL_VERSION = re.compile(r"^rccl-tests: Version (\S+)$")
# RCCL's version block (init.cc showVersion, printed at NCCL_DEBUG=VERSION, the default of newer RCCL) after
# the device list: `RCCL version : 2.22.3-HEAD:7d8d67c`, then HIP, ROCm, the host and the library's path
RCCL_BLOCK = re.compile(r"^(?P<key>RCCL version|HIP version|ROCm version|Hostname|Librccl path) *: (?P<value>.*)$")
START = re.compile(r"^# Collective test starting: (\S+)$")
END = re.compile(r"^# Collective test concluded: (\S+)$")
PARAMS = re.compile(r"^# nThread (?P<nThread>\d+) nGpus (?P<nGpus>\d+) minBytes (?P<minBytes>\d+) maxBytes "
                    r"(?P<maxBytes>\d+) step: (?P<step>\d+)\((?P<step_kind>factor|bytes)\) warmup iters: "
                    r"(?P<warmup_iters>\d+) iters: (?P<iters>\d+)(?: agg iters: (?P<agg_iters>\d+))? validation: "
                    r"(?P<validation>\d+)(?: graph: (?P<graph>\d+))?(?: unalign: (?P<unalign>\d+))?$")
DEVICE = re.compile(r"^#\s+Rank\s+(?P<rank>\d+)(?: Group\s+(?P<group>\d+))? Pid\s+(?P<pid>\d+) on\s+(?P<host>\S+)"
                    r" device\s+(?P<device>\d+) \[(?P<pci>[0-9a-fA-Fx:.]+)\] (?P<name>.+)$")
# the program's own remarks between its parameters and its table
REMARKS = re.compile(r"^# (?:Blocking Enabled: |Parallel Init Enabled: |Per-Iteration Report: |Writing JSON output to "
                     r"|skipping json output; ).*$"
                     r"|^# Errors with asterisks indicate errors that have exceeded the maximum threshold\.$")
REDUCED = re.compile(r"^# Reducing maxBytes to (\d+) due to memory limitation$")
CYCLE = re.compile(r"^# Testing (\d+) cycle\.$")  # rccl-tests --stress_cycles: the sweeps again
OOB = re.compile(r"^# Out of bounds values : (\d+) (OK|FAILED)$")
AVG = re.compile(r"^# Avg bus bandwidth\s+: (\S+)(?: (OK|FAILED))?$")  # OK/FAILED: NCCL_TESTS_MIN_BW
MEMORY = re.compile(r"^# GPU memory usage\s+: (.+)$")
ERROR = re.compile(r"^# error: (.*)$")
BANNER = {"out-of-place": "oop", "in-place": "ip", "(+": None, "per-iteration)": None}
TYPE = re.compile(r"[a-z][a-z0-9_]*")
REDOP = re.compile(r"[a-z]*")  # hypercube prints "" as its op
ROOT = re.compile(r"-?\d+")
WRONG = re.compile(r"\d+|[1-9](?:\.\d+)?e\+\d+")  # %g of a count: 96, 1.04858e+06 (a fraction only with e+)
NO_OP = ("none", "", None)  # the op of a benchmark that reduces nothing (hypercube: ""; 2.0-2.11: no column)
REDOP_AT = slice(36, 46)  # where 2.13+'s "%12li  %12li  %8s  %6s  %6s" prints the op
#: a half's header word -> its column (after oop_ or ip_), whose unit its units line gives as `(unit)`;
#: `error` is 2.0-2.11's largest deviation
HALF = {"time": ("time_us", Column("us", False)), "cputime": ("cputime_us", Column("us", False)),
        "hipevt": ("hipevt_us", Column("us", False)), "algbw": ("algbw_GBps", Column("GB/s", True)),
        "busbw": ("busbw_GBps", Column("GB/s", True)), "#wrong": ("wrong", Column(None, wrong=True)),
        "error": ("error", Column(None)), "i_min": ("i_min_us", Column("us")), "i_max": ("i_max_us", Column("us")),
        "i_p99": ("i_p99_us", Column("us")), "i_cv%": ("i_cv_pct", Column("%"))}
PER_ITERATION = ["i_min", "i_max", "i_p99", "i_cv%"]  # 2.19.2+ -I 1


def _header(tokens: list[str], halves: list[str]) -> tuple[list[str], list[str]] | None:
    """The columns a header line names, and the units line that goes with it; None: not a header."""
    lead = ["size", "count", "type"]
    if tokens[:3] != lead:
        return None
    rest = tokens[3:]
    for name in ("redop", "root"):
        if rest[:1] == [name]:
            lead.append(rest.pop(0))
    columns, units = list(lead), ["(B)", "(elements)"]
    for h in halves:
        group = rest[:2] if rest[1:2] == ["hipevt"] else rest[:1]
        group += rest[len(group):len(group) + 3]
        if group[:1] not in (["time"], ["cputime"]) or group[-3:-1] != ["algbw", "busbw"] \
                or group[-1] not in ("#wrong", "error"):
            return None
        if rest[len(group):len(group) + 4] == PER_ITERATION:
            group += PER_ITERATION
        del rest[:len(group)]
        for g in group:
            name, column = HALF[g]
            columns.append(f"{h}_{name}")
            units += [f"({column.unit})"] if column.unit else []
    if rest[:3] == ["algo", "proto", "nchannels"]:
        columns += rest[:3]
        del rest[:3]
    if rest == ["timestamp"]:
        columns.append("timestamp")
        units += ["%Y-%m-%d", "%H:%M:%S"]
    elif rest:
        return None
    return columns, units


class _Run:
    """One run's state while its lines are read."""

    def __init__(self, tool: str, known: Container[str]) -> None:
        self.tool, self.known = tool, known  # the tool's name; the binaries it has
        self.meta: dict[str, Any] = {"devices": []}
        self.version: str | None = None
        self.benchmark: str | None = None
        self.title: Quoted | None = None
        self.rccl = False
        self.started = False  # the start marker was seen: the end marker ends the run
        self.footer = False   # `# Avg bus bandwidth` seen
        self.concluded = False  # the end marker seen
        self.ended = False    # the end marker (and 2.17.7+'s `#` after it), or the footer of a run without markers
        self.in_devices = False
        self.halves: list[str] | None = None
        self.columns: list[str] | None = None
        self.units: list[str] | None = None
        self.sweeps: list[Sweep] = []
        self.seen: set[tuple] = set()
        self.new_cycle = False
        self.cycle: int | None = None  # rccl-tests' stress cycle, from the second
        self.oob: Quoted | None = None
        self.last_error: Quoted | None = None


def tables(t: Text, tool: str, known: Container[str]) -> list[Sweep]:
    """Every table of an nccl-tests or rccl-tests output: one per (type, op, root), stress cycle and run,
    as `tool`'s sweeps; `known`: the binaries a start line may name."""
    runs = [_Run(tool, known)]
    for i, (line, lineno) in enumerate(t.lines):
        if runs[-1].ended and _starts_run(line):  # a job's next run
            runs.append(_Run(tool, known))
        _line(runs[-1], t, i, line, lineno)
    for run in runs:
        if not run.sweeps:
            raise TruncatedError("the output ends before the first row", *t.lines[-1])
        _finish(run)
    sweeps = [s for run in runs for s in run.sweeps]
    last = t.lines[-1]
    if t.cut and END.match(last.text):  # printed with its newline in one call: cut there
        raise TruncatedError("the output ends inside its end line (no newline after it)", *last)
    return sweeps


def _starts_run(line: str) -> bool:
    return bool(VERSION.match(line) or START.match(line) or PARAMS.match(line))


def _line(run: _Run, t: Text, i: int, line: str, lineno: int) -> None:
    if run.ended:
        return _after_end(run, t, i, line, lineno)
    if (m := VERSION.match(line)):
        if run.title is not None:
            raise UnknownFormatError("the version line is not the first line of its run", line, lineno)
        run.version, run.rccl, run.title = m.group("version"), m.group("fork") == "rccl", Quoted(line, lineno)
        run.meta.update(headers=int(m.group("headers")), library=int(m.group("library")))
        if m.group("commit"):
            run.meta["commit"] = m.group("commit")
        return
    if (m := START.match(line)):
        if run.started or "nThread" in run.meta:
            raise UnknownFormatError("a second nccl-tests run in one output", line, lineno)
        name = m.group(1)
        if name not in run.known:
            raise UnknownFormatError("unknown nccl-tests benchmark", line, lineno)
        run.benchmark, run.started, run.title = name, True, Quoted(line, lineno)
        return
    if (m := PARAMS.match(line)):
        if "nThread" in run.meta:
            raise UnknownFormatError("a second nccl-tests run in one output", line, lineno)
        run.meta.update({k: (v if k == "step_kind" else int(v)) for k, v in m.groupdict().items() if v is not None})
        run.title = run.title or Quoted(line, lineno)
        return
    if "nThread" not in run.meta:
        raise UnknownFormatError("text before the nccl-tests parameter line", line, lineno)
    if (m := END.match(line)):
        if not run.started or m.group(1) != run.benchmark:  # also a cut end line
            raise UnknownFormatError(f"the end line names another benchmark than {run.benchmark}", line, lineno)
        if not run.footer:
            raise UnknownFormatError("the end line before the footer", line, lineno)
        run.concluded, run.ended = True, not _closes_with_hash(run)
        return
    if run.concluded:  # 2.17.7+: the memory report (-M 1), then `#`
        if (m := MEMORY.match(line)):
            run.meta["gpu_memory"] = m.group(1)
            return
        if line.strip() != "#":
            raise UnknownFormatError("output between '# Collective test concluded' and its closing '#'", line,
                                     lineno)
        run.ended = True
        return
    if run.footer:
        if line.strip() != "#":
            raise UnknownFormatError("output between the footer and '# Collective test concluded'", line, lineno)
        run.ended = not run.started  # every version ends its footer with `#`: a run without markers ends there
        return
    if (m := RCCL_VERSION.match(line)):
        run.rccl, run.version = True, run.version or m.group(1)
        return
    if (m := RCCL_BLOCK.match(line)):
        run.rccl = True
        run.meta[m.group("key").lower().replace(" ", "_")] = m.group("value").strip()
        return
    if line.strip() == "# Using devices":
        run.in_devices = True
        return
    if (m := DEVICE.match(line)):
        if not run.in_devices:
            raise UnknownFormatError("device line outside '# Using devices'", line, lineno)
        d = m.groupdict()
        run.meta["devices"].append({"rank": int(d["rank"]), "host": d["host"], "device": int(d["device"]),
                                    "pci": d["pci"], "name": d["name"].strip()})
        return
    if REMARKS.match(line):
        run.rccl = run.rccl or "asterisks" in line
        return
    if (m := REDUCED.match(line)):
        run.meta.update(maxBytes_asked=run.meta["maxBytes"], maxBytes=int(m.group(1)))
        run.meta["minBytes"] = min(run.meta["minBytes"], run.meta["maxBytes"])
        return
    if (m := CYCLE.match(line)):
        run.cycle, run.seen, run.new_cycle = int(m.group(1)), set(), True
        return
    if (m := OOB.match(line)):
        run.meta["out_of_bounds"] = int(m.group(1))
        if m.group(2) == "FAILED":
            run.oob = Quoted(line, lineno)
        return
    if (m := AVG.match(line)):
        run.meta["avg_busbw_GBps"] = number(m.group(1), line, lineno)
        if m.group(2):
            run.meta["avg_busbw_check"] = m.group(2)
        run.footer = True
        return
    if line.startswith("#"):
        return _header_line(run, line, lineno)
    _row(run, t, line, lineno)


def _closes_with_hash(run: _Run) -> bool:
    """nccl-tests 2.17.7+ and rocm-systems' rccl-tests print `#` after the end line (finalizeFooter)."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", run.version or "")
    return bool(m) and (run.rccl or tuple(map(int, m.groups())) >= (2, 17, 7))


def _after_end(run: _Run, t: Text, i: int, line: str, lineno: int) -> None:
    """What a run prints after its end: NCCL's last error (2.13.4-2.17.2: bare, often an empty line, the
    last line; 2.17.3+: `# error: TEXT`)."""
    last = i == len(t.lines) - 1 or _starts_run(t.lines[i + 1].text)
    # a row starts with its size
    if (m := ERROR.match(line)) or (last and not line.startswith("#") and run.last_error is None
                                    and not (line.split() or [""])[0].isdigit()):
        run.meta["nccl_last_error"] = m.group(1) if m else line
        run.last_error = Quoted(line, lineno)
        return
    where = "'# Collective test concluded'" if run.started else "the footer ('# Avg bus bandwidth')"
    raise UnknownFormatError(f"output after {where}", line, lineno)


def _header_line(run: _Run, line: str, lineno: int) -> None:
    tokens = line[1:].split()
    if not tokens:
        run.in_devices = False
        return
    if all(tok in BANNER for tok in tokens) and any(BANNER[tok] for tok in tokens):
        run.halves = [BANNER[tok] for tok in tokens if BANNER[tok]]
        return
    if run.halves and run.columns is None and (found := _header(tokens, run.halves)):
        run.columns, run.units = found
        return
    if run.columns is not None and run.units is not None and tokens == run.units:
        run.units = None  # seen
        return
    raise UnknownFormatError("unknown nccl-tests header line", line, lineno)


def _row(run: _Run, t: Text, line: str, lineno: int) -> None:
    if run.columns is None or run.units is not None:
        raise UnknownFormatError("data row before the nccl-tests column header", line, lineno)
    cols = run.columns
    fields = line.split()
    want = len(cols) + ("timestamp" in cols)
    if len(fields) == want - 1 and "redop" in cols and not line[REDOP_AT].strip():
        fields.insert(cols.index("redop"), "")  # hypercube's empty op
    if len(fields) != want:
        raise cut_row(t, line, lineno, f"row has {len(fields)} fields, this header's rows have {want}", want)
    if "timestamp" in cols:
        fields[-2:] = [" ".join(fields[-2:])]
    row = {col: _value(t, col, val, line, lineno) for col, val in zip(cols, fields)}
    key = (row["type"], row.get("redop"), row.get("root"))
    cur = run.sweeps[-1] if run.sweeps else None
    if cur is None or key != (cur.meta["type"], cur.meta["redop"], cur.meta["root"]) or run.new_cycle:
        run.new_cycle = False
        if key in run.seen:
            raise UnknownFormatError(f"rows of {'/'.join(map(str, key))} again after other rows: two runs' rows in "
                                     f"one table", line, lineno)
        if cur and (key[1] in NO_OP) != (cur.meta["redop"] in NO_OP):  # a reduction's rows and another's
            ops = [op or "(none)" for op in (key[1], cur.meta["redop"])]
            raise UnknownFormatError(f"rows with op {ops[0]} after rows with op {ops[1]}: two benchmarks' rows in one "
                                     f"table", line, lineno)
        run.seen.add(key)
        cur = _sweep(run, key)
    elif row["size"] < cur.rows[-1]["size"] or row["size"] == cur.rows[-1]["size"] > 0 \
            and run.meta["step_kind"] == "factor":  # rounding per rank repeats a size only at 0 or in linear steps
        raise UnknownFormatError("message sizes do not increase", line, lineno)
    if any(row.get(f"{h}_wrong") for h in ("oop", "ip")):
        cur.error_lines.append(Quoted(line, lineno))
    cur.rows.append(row)
    cur.row_lines.append(Quoted(line, lineno))


def _value(t: Text, col: str, val: str, line: str, lineno: int) -> Any:
    if col in ("size", "count", "nchannels"):
        return count(val, line, lineno)
    if col in ("type", "redop", "root"):
        if not {"type": TYPE, "redop": REDOP, "root": ROOT}[col].fullmatch(val):
            raise cut_row(t, line, lineno, f"{col} {val!r} is not an nccl-tests {col}")
        return int(val) if col == "root" else val
    if col in ("algo", "proto", "timestamp"):
        return val
    if val == "N/A" and (col.endswith(("_wrong", "_error", "_hipevt_us"))):
        return None
    if col.endswith("_wrong"):
        if not WRONG.fullmatch(val):
            raise BadNumberError(f"{val!r} is not a count", line, lineno)
        return round(float(val))
    return number(val, line, lineno)


def _sweep(run: _Run, key: tuple) -> Sweep:
    title = run.title.text[2:]  # each title line starts with "# "
    s = Sweep(run.tool, run.benchmark, title, run.version, "CUDA", list(run.columns), title_line=run.title)
    s.meta = {"type": key[0], "redop": key[1], "root": key[2]}
    if run.cycle:
        s.meta["cycle"] = run.cycle
    run.sweeps.append(s)
    return s


def _finish(run: _Run) -> None:
    """Completeness, validation and the run's facts on each table."""
    if run.oob and not any(s.error_lines for s in run.sweeps):
        for s in run.sweeps:  # 2.0-2.11 count no wrong elements: the footer fails every table
            s.error_lines.append(run.oob)
    checked = run.meta["validation"] > 0
    for s in run.sweeps:
        s.meta = {**run.meta, **s.meta, "devices": run.meta["devices"]}
        s.benchmark, s.version, s.complete = run.benchmark, run.version, run.ended
        s.device = "ROCM" if run.rccl else "CUDA"
        if run.rccl:
            s.meta["fork"] = "rccl-tests"
        counted = [c for c in s.columns if c.endswith("_wrong")]
        if {"oop_wrong", "ip_wrong"} <= set(counted) and _skips_in_place(run.benchmark) \
                and all(row["ip_wrong"] is None for row in s.rows):
            counted.remove("ip_wrong")  # checked out of place only
        for (line, lineno), row in zip(s.row_lines, s.rows):
            halves = [row[c] for c in counted]
            if checked and None in halves:
                raise UnknownFormatError("N/A for a wrong count in a run that checks its data (validation: 1)",
                                         line, lineno)
            if not checked and any(h is not None for h in halves):
                raise UnknownFormatError("a wrong count in a run without data check (validation: 0)", line, lineno)
    _check_rows(run)


def _skips_in_place(benchmark: str | None) -> bool:
    """alltoall, alltoallv and sendrecv check no in-place result (`reportErrors = in_place ? 0 : 1`): N/A in
    every in-place row even with -c 1. A run without markers (before 2.16.7) names no binary: its table shows."""
    return benchmark is None or benchmark.removesuffix("_mpi") in ("alltoall_perf", "alltoallv_perf", "sendrecv_perf")


def _check_rows(run: _Run) -> None:
    """Each table holds the sweep of the parameter line, row k at most its k-th size (printed sizes are
    rounded down to whole elements per rank; alltoallv's generated pattern sends at most the size too):
    more rows are another run's, a larger size a missing row. Only the last table may stop early
    (results.parse.check names where)."""
    m = run.meta
    longest = max(len(s.rows) for s in run.sweeps)
    sizes, size = [], m["minBytes"]
    while size <= m["maxBytes"] and len(sizes) <= longest:  # (-b 0 -f 2 or -i 0 would never end)
        sizes.append(size)
        size = size * m["step"] if m["step_kind"] == "factor" else size + m["step"]
    for s in run.sweeps:
        where = f"{s.meta['type']}" + (f" {s.meta['redop']}" if s.meta.get("redop") else "")
        if len(s.rows) > len(sizes) or (len(s.rows) < len(sizes) and s is not run.sweeps[-1]):
            more = " or more" if len(sizes) > longest else ""
            raise UnknownFormatError(f"{len(s.rows)} rows of {where}; the sweep of {m['minBytes']}..{m['maxBytes']} B "
                                     f"has {len(sizes)}{more} sizes: rows of another run", *s.row_lines[-1])
        for k, ((line, lineno), row) in enumerate(zip(s.row_lines, s.rows)):
            if row["size"] > sizes[k]:
                raise TruncatedError(f"row {k + 1} of {where} prints {row['size']} B, above the sweep's size "
                                     f"{sizes[k]} B there: a row is missing before it", line, lineno)
