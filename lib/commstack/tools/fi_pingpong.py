"""libfabric's fi_pingpong (util/pingpong.c): a server and a client ping-pong over one provider; its format:
docs/harness.md#the-formats-read-per-tool."""

from __future__ import annotations

import re
import shlex
from typing import Any

from commstack.errors import BadNumberError, TruncatedError, UnknownFormatError
from commstack.tools.lines import Quoted, Sweep, cut_row, finished, own_lines, tool_error
from commstack.tools.noise import Note
from commstack.tools.base import (Benchmark, Column, InSpec, Program, SizeFlags, Tool, client_argv, on_path, options,
                                  pair_command)

NAME = "fi_pingpong"
COLUMNS = {
    "size": Column("B"),
    "iterations": Column(None),
    "acked": Column(None),         # =N: every message acknowledged; +N, -N: lost or doubled
    "total_B": Column("B"),
    "elapsed_s": Column("s"),
    # MB/sec is bytes per microsecond (10^6 B/s) and usec/xfer one way, as OSU's
    "bandwidth_MBps": Column("MB/s", True, ("bandwidth", "GB/s", 1e-3)),
    "latency_us": Column("us", False, ("latency", "µs", 1.0)),
    "rate_Mxfers": Column("Mxfers/s"),
}
HEADER = ["bytes", "#sent", "#ack", "total", "time", "MB/sec", "usec/xfer", "Mxfers/sec"]
DEFAULT_SIZES = [64, 256, 1024, 4096, 65536, 1048576]
MAX_DATA_MSG = (1 << 22) + (1 << 21)  # PP_MAX_DATA_MSG: 6 MiB, the largest size of -S all
DEFAULT_ITERATIONS = 10
# the largest message of a provider's datagram endpoint, which ends every sweep (pp_alloc_msgs: tx_size is
# at most ep_attr->max_msg_size): udp's is fixed (prov/udp/src/udpx_attr.c), verbs' is the port's active
# MTU (verbs_info.c: vrb_mtu_type_to_len, 256 to 4096). fi_pingpong's endpoint is dgram unless -e says
# otherwise (pingpong.c main: hints->ep_attr->type = FI_EP_DGRAM)
DGRAM_CAPS = {"udp": (1472,), "verbs": (256, 512, 1024, 2048, 4096)}

SIZE = re.compile(r"(?P<int>\d+)(?:\.(?P<frac>\d))?(?P<mag>[kmg]?)")
COUNT = re.compile(r"(?P<int>\d+)(?P<mag>[kmb]?)")
ACK = re.compile(r"(?P<sign>[=+-])(?P<n>\d+[kmb]?)")
TIME = re.compile(r"\d+\.\d\ds")
FLOAT = re.compile(r"-?\d+\.\d\d|-?(?:inf|nan)")
PRINTERR = re.compile(r"^(?P<call>[\w/()]+)\(\): (?P<file>\S+):(?P<line>\d+)\s*, ret=(?P<ret>-?\d+) \((?P<why>.*)\)$")
ERR = re.compile(r"^\[error\] (?P<file>\S+):(?P<line>\d+)\s*: (?P<why>.*)$")
DEBUG = re.compile(r"^\[debug\] \S+:\d+\s*: ")
OPTION_ERROR = re.compile(r"^(?:Unknown endpoint : .*|Error parsing \".*\": .*|Usage:)$")
#: what a known error means, by its text
MEANING = [
    (re.compile(r"^fi_getinfo\(\).*ret=-61 "),
     "libfabric has no provider for the asked provider and endpoint type (fi_getinfo: -61, no data): the provider "
     "is not built in or not loaded, or it lacks the endpoint type (-e rdm|msg|dgram)"),
    (re.compile(r"failed to connect: Connection refused$"),
     "the client found no server listening on its control port (connection refused)"),
    (re.compile(r"ctrl/read: no data or remote connection closed$"),
     "the other side closed the control connection: it failed first"),
]


def size_str(size: int) -> str:
    """util/pingpong.c's size_str(): how a size is printed."""
    base, mag = next((b, m) for m, b in reversed(SIZE_BASES.items()) if size >= b or b == 1)
    fraction = (size % base) * 10 // base if size // base < 10 else 0
    return f"{size // base}.{fraction}{mag}" if fraction else f"{size // base}{mag}"


def cnt_str(cnt: int) -> str:
    """util/pingpong.c's cnt_str(): how a count is printed."""
    base, mag = next((b, m) for m, b in reversed(COUNT_BASES.items()) if cnt >= b or b == 1)
    return f"{cnt // base}{mag}"


def all_sizes(limit: int = MAX_DATA_MSG) -> list[int]:
    """The sizes of -S all up to `limit`: 0, 1, then 2^i and 1.5 * 2^i (generate_test_sizes)."""
    sizes = [0, 1, *(size for i in range(1, limit.bit_length()) for size in (1 << i, 3 << (i - 1)))]
    return [size for size in sizes if size <= limit]


def _decode(text: str, pattern: re.Pattern, bases: dict[str, int], line: str, lineno: int) -> int:
    m = pattern.fullmatch(text)
    if not m:
        raise BadNumberError(f"{text!r} is not a size or count as fi_pingpong prints them", line, lineno)
    base = bases[m.group("mag")]
    return int(m.group("int")) * base + int(m.groupdict().get("frac") or 0) * base // 10


SIZE_BASES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
COUNT_BASES = {"": 1, "k": 10 ** 3, "m": 10 ** 6, "b": 10 ** 9}


def parse_pingpong(text: str) -> Sweep:
    """The one table of an fi_pingpong output (client or server side), no completeness check."""
    t = own_lines(text)
    sweep = Sweep(NAME, NAME, NAME, None, None, list(COLUMNS), title_line=t.lines[0])
    sweep.meta["size_texts"] = []
    header = False
    for line, lineno in t.lines:
        if (argv := client_argv(line, NAME)) is not None:
            if header or "args" in sweep.meta:
                raise UnknownFormatError("the pair launcher's line after the table started", line, lineno)
            sweep.meta["args"] = argv
            continue
        if PRINTERR.match(line) or ERR.match(line) or OPTION_ERROR.match(line):
            raise tool_error(NAME, MEANING, "fi_pingpong reported an error", line, lineno)
        if DEBUG.match(line):
            t.notes.append(Note(line, lineno, NAME, "fi_pingpong's debug line (-v)"))
            continue
        fields = line.split()
        if fields == HEADER:
            if header:
                raise UnknownFormatError("a second header: two outputs in one", line, lineno)
            header = True
            continue
        if not header:
            raise UnknownFormatError("not an fi_pingpong line (its header, `bytes #sent #ack ...`, comes first)",
                                     line, lineno)
        if len(fields) != len(HEADER):
            if t.cut and lineno == t.lines[-1].lineno:
                raise TruncatedError("the output ends mid-row (no newline after it)", line, lineno)
            raise cut_row(t, line, lineno, f"an fi_pingpong row has {len(HEADER)} fields, this one {len(fields)}",
                          len(HEADER))
        sweep.rows.append(_row(fields, line, lineno, sweep))
        sweep.meta["size_texts"].append(fields[0])
        sweep.row_lines.append(Quoted(line, lineno))
    if not sweep.rows:
        raise TruncatedError("the output ends before the first row", *t.lines[-1])
    t.notes.sort(key=lambda n: n.lineno)  # the debug lines among the others, stably
    finished(t, [sweep])
    return sweep


def _row(fields: list[str], line: str, lineno: int, sweep: Sweep) -> dict[str, Any]:
    size, sent, ack, total, time, mbps, usec, rate = fields
    for text, pattern in ((time, TIME), (mbps, FLOAT), (usec, FLOAT), (rate, FLOAT)):
        if not pattern.fullmatch(text):
            raise BadNumberError(f"not a number as fi_pingpong prints it: {text!r}", line, lineno)
    if not ACK.fullmatch(ack):
        raise BadNumberError(f"{ack!r} is not an ack count (=N, +N or -N)", line, lineno)
    row = {"size": _decode(size, SIZE, SIZE_BASES, line, lineno),
           "iterations": _decode(sent, COUNT, COUNT_BASES, line, lineno),
           "acked": ack,
           "total_B": _decode(total, SIZE, SIZE_BASES, line, lineno),
           "elapsed_s": float(time[:-1]), "bandwidth_MBps": float(mbps), "latency_us": float(usec),
           "rate_Mxfers": float(rate)}
    if ack[0] != "=":
        # show_perf: +N acks missing, -N more acks than sends; either way messages were lost or doubled
        sweep.error_lines.append(Quoted(line, lineno))
    if sweep.rows and row["size"] <= sweep.rows[-1]["size"]:
        raise UnknownFormatError(f"size {size} after {sweep.meta['size_texts'][-1]}: fi_pingpong's sizes grow",
                                 line, lineno)
    return row


def asked(args: list[str]) -> tuple[list[int], int]:
    """The sizes (before the provider's limit) and iterations `args` ask for, as getopt reads -S and -I."""
    sizes, iterations = DEFAULT_SIZES, DEFAULT_ITERATIONS
    for flag, value in options(args, ("-S", "-I")):
        if flag == "-S":
            sizes = all_sizes() if value == "all" else [_plain(value, "-S")]
        else:
            iterations = _plain(value, "-I")
    return sizes, iterations


def dgram_caps(args: list[str]) -> tuple[int, ...]:
    """The largest messages the provider's datagram endpoint may have, where `args` run one (-e dgram, or
    no -e) over a provider whose cap is known (DGRAM_CAPS); () elsewhere."""
    given = dict(options(args, ("-p", "-e")))  # the last of each, as getopt reads them
    return DGRAM_CAPS.get(given.get("-p"), ()) if given.get("-e", "dgram").lower() == "dgram" else ()


def _plain(value: str, flag: str) -> int:
    if not value.isascii() or not value.isdigit():
        raise UnknownFormatError(f"{flag} {value}: not a plain number")
    return int(value)


def check(sweep: Sweep, args: list[str]) -> None:
    """Raise the first problem of a parsed sweep against the arguments it ran with (those the pair
    launcher's line gives, else `args`): a size missing or not asked for, fewer iterations. A lost message
    is a failed check that results.parse.check raises before it asks the tool."""
    argv = sweep.meta.get("args", args)
    try:
        want, iterations = asked(argv)
    except UnknownFormatError as e:  # the pair launcher's line (the output's first) holds the arguments
        raise UnknownFormatError(e.message, *sweep.title_line) if "args" in sweep.meta else e from None
    for i, ((line, lineno), row, text) in enumerate(zip(sweep.row_lines, sweep.rows, sweep.meta["size_texts"])):
        if i >= len(want) or size_str(want[i]) != text:
            expected = f"{size_str(want[i])} comes next" if i < len(want) else "no size comes after the last asked for"
            raise UnknownFormatError(f"fi_pingpong: size {text} where {expected}: the output of other arguments",
                                     line, lineno)
        if cnt_str(iterations) != cnt_str(row["iterations"]):
            raise UnknownFormatError(f"fi_pingpong: {row['iterations']} iterations, {iterations} asked for", line,
                                     lineno)
        row["size"], row["iterations"] = want[i], iterations  # cnt_str's 1k: 1000 to 1999
    if len(sweep.rows) < len(want):  # stopped early: cut short, unless at the datagram endpoint's largest message
        if not any(sweep.rows[-1]["size"] <= cap < want[len(sweep.rows)] for cap in dgram_caps(argv)):
            raise TruncatedError(f"fi_pingpong: the sweep stops at {sweep.meta['size_texts'][-1]}; "
                                 f"{size_str(want[len(sweep.rows)])} comes next of the {len(want)} sizes asked for",
                                 *sweep.row_lines[-1])
        sweep.meta["max_size"] = "the datagram endpoint's largest message"


def title(line: str) -> Benchmark | None:
    """fi_pingpong's where a first own line is its header, the pair launcher's line naming it, or one of its
    error lines."""
    own = line.split() == HEADER or client_argv(line, NAME) is not None or PRINTERR.match(line) \
        or ERR.match(line) and "pingpong" in line
    return BENCHMARKS[NAME] if own else None


def program(b: Benchmark, p: Program) -> list[str]:
    """The pair launcher with fi_pingpong as server and client, over the system's provider (-p): the
    server on the control port the launcher picks (-B), the client to it (-P, then the server's host)."""
    common = shlex.join([*(["-p", p.provider] if p.provider else []), *p.args])
    return pair_command(p.home, f"{{program}} {common} -B {{port}}", f"{{program}} {common} -P {{port}} {{host}}")


PLACEHOLDER = "$FI_PINGPONG"  # the binary in a dry run where it is not on PATH
native, planned = on_path(NAME, "libfabric-bin", "libfabric", PLACEHOLDER)


TOOL = Tool(NAME, NAME, "fabric", "pair", COLUMNS, PLACEHOLDER, program, lambda text: [parse_pingpong(text)],
            title, native=native, planned=planned, sizes_check=lambda b, sweep, args: check(sweep, args),
            in_env=InSpec("libfabric", f"bin/{NAME}"), facts=(InSpec("libfabric", "bin/fi_info"),))
BENCHMARKS: dict[str, Benchmark] = {
    NAME: Benchmark(NAME, TOOL, (NAME,), "bandwidth_MBps", SizeFlags(), line_rate_factor=1)}
