"""UCX's ucx_perftest (src/tools/perf): a server and a client, one message size per run; its format:
docs/harness.md#the-formats-read-per-tool."""

from __future__ import annotations

import re
import shlex
from typing import Any

from commstack.errors import BadNumberError, TruncatedError, UnknownFormatError
from commstack.tools.lines import Quoted, Sweep, cut_row, finished, own_lines, tool_error
from commstack.tools.base import (Benchmark, Column, InSpec, Program, SizeFlags, Tool, client_argv, on_path, options,
                                  pair_command)

NAME = "ucx_perftest"
TESTS = {"tag_lat": "tag match latency", "tag_bw": "tag match bandwidth"}
#: the row's figures in print order; then bandwidth_MBps, the overall bandwidth in MB/s (x 1.048576) as
#: OSU's and fi_pingpong's, so that layers compare
PRINTED = ["iterations", "latency_pct_us", "latency_avg_us", "latency_us", "bandwidth_avg_MiBps",
           "bandwidth_MiBps", "message_rate_avg", "message_rate"]
COLUMNS = {
    "size": Column("B"),
    "iterations": Column(None),
    "latency_pct_us": Column("us"),     # the -R percentile (50 %)
    "latency_avg_us": Column("us"),     # of the last report interval
    "latency_us": Column("us", False, ("latency", "µs", 1.0)),   # overall; tag_bw: the overhead per message
    "bandwidth_avg_MiBps": Column("MiB/s"),
    "bandwidth_MiBps": Column("MiB/s"),
    "bandwidth_MBps": Column("MB/s", True, ("bandwidth", "GB/s", 1e-3)),
    "message_rate_avg": Column("msg/s"),
    "message_rate": Column("msg/s", True, ("message rate", "messages/s", 1.0)),
}
DEFAULT_SIZE = 8  # perftest.c: msg_size_list {8}

# the client's table header (print_header), five lines, in the layouts of perftest.c and perftest_run.c:
# 1.8: no Stage column, `typical` latency, `latency` always; 1.9-1.11: a Stage column, `%8s (usec)` (latency
# or overhead); 1.12+: the percentile column (`%4.1f%%ile`), `Test` for `Stage` with -f (only the final row)
_GROUP = r"\s+(?P<lat>latency|overhead) \(usec\)\s+\|\s+bandwidth \(MB/s\)\s+\|\s+message rate \(msg/s\)\s+\|$"
_FIGURES = r" average \| overall \|\s+average \|\s+overall \|\s+average\s+\|\s+overall\s+\|$"


def _rule(*widths: int) -> str:
    """A rule line of print_header: `+`, then each column's dashes and a `+`."""
    return "+" + "+".join("-" * w for w in widths) + "+"


LAYOUTS = {
    "1.8": (_rule(14, 29, 21, 23), re.compile(r"^\|\s+\|" + _GROUP), _rule(14, 9, 9, 9, 10, 10, 11, 11),
            re.compile(r"^\| # iterations \| (?P<typical>typical) \|" + _FIGURES)),
    "1.9": (_rule(14, 14, 29, 21, 23), re.compile(r"^\|\s+\|\s+\|" + _GROUP), _rule(14, 14, 9, 9, 9, 10, 10, 11, 11),
            re.compile(r"^\|\s+(?P<stage>Stage|Test)\s+\| # iterations \| (?P<typical>typical) \|" + _FIGURES)),
    "1.12": (_rule(14, 14, 30, 21, 23), re.compile(r"^\|\s+\|\s+\|" + _GROUP), _rule(14, 14, 10, 9, 9, 10, 10, 11, 11),
             re.compile(r"^\|\s+(?P<stage>Stage|Test)\s+\| # iterations \|\s*(?P<pct>\d+\.\d)%ile \|" + _FIGURES)),
}
TOPS = {top: layout for layout, (top, _, _, _) in LAYOUTS.items()}
# the test box (print_header with PRINT_TEST: the server, a loopback or MPI run): 90 dashes to 1.11, 106 after
OUTERS = ("+" + "-" * 90 + "+", "+" + "-" * 106 + "+")
BOX = re.compile(r"^\| (?P<key>API|Test|Data layout|Send memory|Recv memory|Message size|Window size|AM header size):"
                 r" +(?P<value>.*?) *\|$")
SERVER = re.compile(r"^(?:Waiting for connection\.\.\.|Accepted connection from \S+)$")
# a progress row (`[thread N]` first where UCX was built with OpenMP), the final row (`Final:`; to 1.11 only
# with OpenMP; with -f, 1.12+, `%10s` of no batch file's name: blanks); 1.8 marks neither
_PREFIX = r"Final:|\[thread \d+\]"
ROW = re.compile(rf"^(?P<prefix>{_PREFIX})?\s*(?P<values>(?:[\d.\s]|-?inf|-?nan)+)$")
PREFIX = re.compile(rf"^(?:{_PREFIX})")
ROW_START = re.compile(r"^(?:Final:|\[thread |\s*\d)")
FLOAT = re.compile(r"\d+(?:\.\d+)?")
#: the last report interval's averages (print_progress' moment_average): an interval with no iteration in it,
#: as the Final row right after the last progress row on a loaded machine, divides by zero (printf: inf, nan);
#: such an average is no figure (None), and neither are its bandwidth and message rate, which print 0
INTERVAL = {PRINTED.index(c) for c in ("latency_avg_us", "bandwidth_avg_MiBps", "message_rate_avg")}
NOT_FINITE = re.compile(r"-?(?:inf|nan)")
# UCX's other log lines (WARN, DIAG) are notes before the parser sees them (tools.noise)
UCX_ERROR = re.compile(r"^\[\d+\.\d+\] \[[^\]]+\] +\S+:\d+ +UCX +(?P<level>ERROR|FATAL) +(?P<msg>.*)$")
FATAL = re.compile(r"^\[[^\]]+:\d+ *:\d+:\d+\] +\S+:\d+ |^==== backtrace \(tid: *\d+\) ====$")
USAGE = re.compile(r"^\s+Usage: ucx_perftest ")
MEANING = [
    (re.compile(r"no usable transports/devices"),
     "UCX found none of the transports asked for (UCX_TLS, UCX_NET_DEVICES): not built in, or no such device"),
    (re.compile(r"connect\(\) failed: Connection refused"),
     "the client found no server listening (connection refused)"),
    (re.compile(r"unsupported memory type"), "this UCX lacks the memory type asked for (-m): built without it"),
    (re.compile(r"Invalid option argument|missing test name"), "ucx_perftest refused its arguments"),
]


def asked(args: list[str]) -> tuple[str | None, int]:
    """The test (-t) and message size (-s: the sum of its list) that `args` ask for."""
    test, size = None, DEFAULT_SIZE
    for flag, value in options(args, ("-t", "-s")):
        if flag == "-t":
            test = value
        else:
            parts = value.split(",")
            if not all(p.isascii() and p.isdigit() for p in parts):
                raise UnknownFormatError(f"-s {value}: not a list of sizes in bytes")
            size = sum(int(p) for p in parts)
    return test, size


def parse_perftest(text: str, args: list[str] | None = None) -> Sweep:
    """The result of one ucx_perftest run (the client's output, or a server and client transcript),
    no completeness check beyond its Final row. `args`: the client's, where the output has no pair
    launcher's line."""
    t = own_lines(text)
    sweep = Sweep(NAME, NAME, NAME, None, None, ["size", *PRINTED, "bandwidth_MBps"], title_line=t.lines[0])
    box: dict[str, str] = {}
    quoted = t.lines[0]  # the line the arguments' errors quote: the pair launcher's where there is one
    header: list[str] = []
    progress: list[list[float]] = []
    final = None
    for line, lineno in t.lines:
        if (argv := client_argv(line, NAME)) is not None:
            if header or "args" in sweep.meta:
                raise UnknownFormatError("the pair launcher's line after the table started", line, lineno)
            sweep.meta["args"], quoted = argv, Quoted(line, lineno)
        elif (m := UCX_ERROR.match(line)):
            raise tool_error(NAME, MEANING, f"UCX {m.group('level')}: {m.group('msg')}", line, lineno)
        elif FATAL.match(line):
            raise tool_error(NAME, MEANING, "UCX stopped on a fatal error (a backtrace follows)", line, lineno)
        elif USAGE.match(line):
            raise tool_error(NAME, MEANING, "ucx_perftest printed its usage: it refused its arguments", line, lineno)
        elif SERVER.match(line):
            sweep.meta.setdefault("server", []).append(line)
        elif (m := BOX.match(line)):
            box[m.group("key")] = m.group("value")
        elif line in OUTERS:
            continue
        elif final is not None:
            raise UnknownFormatError("output after the Final row", line, lineno)
        elif len(header) < 5 and _header_line(header, line, sweep):
            header.append(line)
        elif (m := ROW.match(line)) and len(header) == 5:
            values = _values(t, m.group("values"), line, lineno)
            if m.group("prefix") == "Final:":
                final = (line, lineno, values)
            else:
                progress.append((line, lineno, values, m.group("prefix")))
        elif len(header) == 5 and ROW_START.match(line):
            # a whole row is its prefix (Final:, [thread N]) and 8 numbers; more is text glued to the numbers
            e = cut_row(t, PREFIX.sub("", line), lineno, "not a complete ucx_perftest row", 8)
            raise type(e)(e.message, line, lineno)
        else:
            raise UnknownFormatError("not a ucx_perftest line", line, lineno)
    if len(header) < 5:
        raise TruncatedError("the output ends before ucx_perftest's table header", *t.lines[-1])
    if args is not None:
        sweep.meta.setdefault("args", args)
    test, size = _test_and_size(sweep, box, quoted)
    sweep.benchmark, sweep.meta["test"] = f"{NAME}-{test}", test
    sweep.meta.update({k.lower().replace(" ", "_"): v for k, v in box.items()})
    final, sweep.complete = _final(sweep, final, progress, t)
    sweep.meta["progress_rows"] = len(progress)
    line, lineno, values = final
    sweep.rows.append({"size": size, **dict(zip(PRINTED, values))})
    sweep.rows[0].update(iterations=int(values[0]), bandwidth_MBps=values[5] * 1.048576)
    sweep.row_lines.append(Quoted(line, lineno))
    finished(t, [sweep])
    return sweep


def _final(sweep: Sweep, final: tuple | None, progress: list[tuple], t: Any) -> tuple[tuple, bool | None]:
    """The final row and whether the output marks it: `Final:`; with -f (`Test` for `Stage`) the one row;
    where the layout has no marker (1.8; 1.9-1.11 built without OpenMP, whose rows have no `[thread N]`)
    the last row, unmarked (None: a cut output is not told from a whole one)."""
    if final is not None:
        return final, True
    if sweep.meta.get("stage") == "Test" and len(progress) == 1 and progress[0][3] is None:
        return progress.pop()[:3], True
    if sweep.meta["layout"] != "1.12" and progress and not any(p[3] for p in progress):
        return progress.pop()[:3], None
    raise TruncatedError(f"ucx_perftest: the output ends before its Final row ({len(progress)} progress rows)",
                         *t.lines[-1])


def _header_line(header: list[str], line: str, sweep: Sweep) -> bool:
    """Whether `line` is the next line of the table header, in the layout its first line set."""
    i = len(header)
    if i == 0:
        sweep.meta["layout"] = TOPS.get(line)
        return line in TOPS
    top, groups, border, names = LAYOUTS[sweep.meta["layout"]]
    if i in (2, 4):
        return line == border
    if i == 1 and (m := groups.match(line)):
        sweep.meta["first_group"] = m.group("lat")
        return True
    if i == 3 and (m := names.match(line)):
        # 1.8-1.11's `typical` latency is the median of the last interval: the 50 % percentile
        sweep.meta["percentile"] = float(m.group("pct")) if m.groupdict().get("pct") else 50.0
        sweep.meta["stage"] = m.groupdict().get("stage")
        return True
    return False


def _values(t: Any, text: str, line: str, lineno: int) -> list[float | None]:
    fields = text.split()
    if len(fields) != 8 and t.cut and lineno == t.lines[-1].lineno:
        raise TruncatedError("the output ends mid-row (no newline after it)", line, lineno)
    if len(fields) != 8:
        # numbers only (ROW): nothing is glued to them, the row has too few or too many
        raise cut_row(t, line, lineno, f"a ucx_perftest row has 8 numbers, this one {len(fields)}")
    for i, f in enumerate(fields):
        if not (FLOAT.fullmatch(f) or i in INTERVAL and NOT_FINITE.fullmatch(f)):
            raise BadNumberError(f"not a number: {f!r}", line, lineno)
    values = [None if NOT_FINITE.fullmatch(f) else float(f) for f in fields]
    if any(values[i] is None for i in INTERVAL):  # no iteration in the interval: its 0 B/s and 0 msg/s are none
        values = [None if i in INTERVAL else v for i, v in enumerate(values)]
    return values


def _test_and_size(sweep: Sweep, box: dict[str, str], quoted: Quoted) -> tuple[str, int]:
    """The test and message size: from the server's box where the output has it, else the client's
    arguments on the pair launcher's line; both where both are there, and they must agree. Errors quote
    `quoted`."""
    line, lineno = quoted
    try:
        test, size = asked(sweep.meta["args"]) if "args" in sweep.meta else (None, None)
    except UnknownFormatError as e:
        raise UnknownFormatError(e.message, line, lineno) from None
    if "Test" in box:
        by_desc = {d: n for n, d in TESTS.items()}
        if box["Test"] not in by_desc:
            raise UnknownFormatError(f"ucx_perftest test {box['Test']!r}: not one commstack runs "
                                     f"({', '.join(TESTS)})", line, lineno)
        if test not in (None, by_desc[box["Test"]]):
            raise UnknownFormatError(f"the server ran {box['Test']!r}, the client asked for -t {test}", line, lineno)
        test = by_desc[box["Test"]]
    if "Message size" in box:
        if not box["Message size"].isdigit():
            raise BadNumberError(f"message size {box['Message size']!r}", line, lineno)
        if size not in (None, int(box["Message size"])):
            raise UnknownFormatError(f"the server ran {box['Message size']} B, the client asked for {size} B",
                                     line, lineno)
        size = int(box["Message size"])
    if test is None or size is None:
        raise UnknownFormatError("ucx_perftest's client output names neither its test nor its message size: run it "
                                 "through commstack's pair launcher, or give the server's output too", line, lineno)
    if test not in TESTS:
        raise UnknownFormatError(f"ucx_perftest -t {test}: not one commstack runs ({', '.join(TESTS)})", line,
                                 lineno)
    want = "latency" if test.endswith("_lat") else "overhead"
    if sweep.meta["first_group"] != want:
        raise UnknownFormatError(f"{test} prints {want} (usec), this table {sweep.meta['first_group']}", line,
                                 lineno)
    return test, size


def title(line: str) -> Benchmark | None:
    """The benchmark the pair launcher's line names (-t); ucx_perftest's own first lines (the test box, the
    table header, the server's wait) name none yet (UNNAMED: the parser reads the test from the box)."""
    if (argv := client_argv(line, NAME)) is not None:
        test = asked(argv)[0] or "(none)"
        if f"{NAME}-{test}" not in BENCHMARKS:
            raise UnknownFormatError(f"ucx_perftest -t {test}: not one commstack runs ({', '.join(TESTS)})")
        return BENCHMARKS[f"{NAME}-{test}"]
    if line in TOPS or line in OUTERS or SERVER.match(line):
        return UNNAMED
    return None


def program(b: Benchmark, p: Program) -> list[str]:
    """The pair launcher with ucx_perftest as server (-p, the port the launcher picks) and client (the
    server's host, the test, the step's arguments: -s SIZE -n ITERATIONS); device memory: -m cuda on both."""
    memory = ["-m", "cuda"] if p.memory == "device" else []
    client = shlex.join(["-t", b.name.split("-", 1)[1], *memory, *p.args])
    return pair_command(p.home, f"{{program}} -p {{port}} {shlex.join(memory)}".rstrip(),
                        f"{{program}} {{host}} -p {{port}} {client}")


PLACEHOLDER = "$UCX_PERFTEST"  # the binary in a dry run where it is not on PATH
native, planned = on_path(NAME, "ucx-utils", "UCX", PLACEHOLDER)


# one message size per run, the one asked for (the parser read it from -s or the server's box): no range to check
TOOL = Tool(NAME, NAME, "ucx", "pair", COLUMNS, PLACEHOLDER, program, lambda text: [parse_perftest(text)], title,
            native=native, planned=planned, sizes_check=lambda b, sweep, args: None,
            in_env=InSpec("ucx", f"bin/{NAME}"), facts=(InSpec("ucx", "bin/ucx_info"),))
BENCHMARKS: dict[str, Benchmark] = {
    f"{NAME}-tag_lat": Benchmark(f"{NAME}-tag_lat", TOOL, (f"{NAME}-tag_lat",), "latency_us", SizeFlags()),
    # the client (rank 1, pair.py) sends: slowing its node's egress slows the figure, its ingress does not
    f"{NAME}-tag_bw": Benchmark(f"{NAME}-tag_bw", TOOL, (f"{NAME}-tag_bw",), "bandwidth_MBps", SizeFlags(),
                                line_rate_factor=1, sender=1),
}
UNNAMED = Benchmark(NAME, TOOL, (), "latency_us", SizeFlags())
