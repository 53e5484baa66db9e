"""Parse and check a run's output: its tool (commstack.tools) told by the title, its tables parsed by
that tool's strict parser (lines shared by all: commstack.results.lines), then checked.

`parse_output` is what the runner and `commstack parse` call: it also checks that the sweep has the
first and last sizes its arguments (or the benchmark's defaults) ask for, and the benchmark's own
validation.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from commstack import benchmarks, tools
from commstack.benchmarks import COLUMNS
from commstack.errors import (PARSE_ERRORS, CommstackError, ParseError, TruncatedError, UnknownFormatError,
                              ValidationFailedError, printable)
from commstack.files import MAX_OUTPUT, read_bounded
from commstack.results.lines import Sweep, own_lines
from commstack.tools import TOOLS, Benchmark


def identify(text: str) -> Benchmark:
    """The benchmark whose output `text` is, from its first own line (the title), as its tool reads it."""
    lineno, line = own_lines(text).lines[0]
    for tool in TOOLS.values():
        try:
            bench = tool.title(line)
        except UnknownFormatError as e:
            raise UnknownFormatError(e.message, line, lineno) from None
        if bench:
            return bench
    labels = [t.label for t in TOOLS.values()]
    raise UnknownFormatError(f"no benchmark title: not {', '.join(labels[:-1])} or {labels[-1]} output", line, lineno)


def parse_tables(text: str, tool: str | None = None) -> list[Sweep]:
    """Every table of one tool's output (`tool` names it; None: the title tells); no completeness check
    (see parse_output)."""
    return (tools.get(tool) if tool else identify(text).tool).parse(text)


def expected_sizes(bench: Benchmark, sweep: Sweep, args: list[str], ranks: int | None = None) -> tuple[int, int]:
    """(lo, hi) that `args`, or the benchmark's defaults for this output's version, ask for."""
    lo, hi = bench.sizes.requested(args)
    if bench.tool.zero_lo_is_default and lo is not None and lo <= 0:
        lo = None  # OSU refuses a minimum of 0 and keeps its default
    printed = bench.tool.printed_range  # an output that prints the range it runs: where the arguments give none
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
    if bench.tool.sizes_check:
        bench.tool.sizes_check(bench, sweep, args)
        return
    lo, hi = expected_sizes(bench, sweep, args, ranks)
    last = sweep.rows[-1]["size"]
    if sweep.meta.get("step_kind") == "bytes":  # nccl-tests -i: linear steps
        following = last + sweep.meta["step"]
    else:
        following = last * sweep.meta.get("step", 2) if last else 1
    first = sweep.rows[0]["size"]
    want = bench.tool.first_size(bench, sweep, lo)
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
    sweeps = identify(text).tool.parse(text)
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
        lineno, line = own_lines(text).lines[0]
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
