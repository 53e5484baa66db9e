"""Parse and check a run's output: its tables split at their titles (results.tables), each parsed by its
tool's strict parser, then checked as a Result with its own verdict, validation and notes. `parse_results` is
what `commstack parse` calls, `parse_output` what the runner calls (one table per step).
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from commstack import benchmarks, exits, tools
from commstack.benchmarks import COLUMNS
from commstack.errors import (PARSE_ERRORS, CommstackError, CrashedError, NoTitleError, ParseError, TruncatedError,
                              UnknownFormatError, ValidationFailedError, printable)
from commstack.results import settle
from commstack.tools import noise
from commstack.tools.lines import TITLE_MISSING, Quoted, Sweep, failed_line, own_lines
from commstack.tools.noise import Note
from commstack.results.tables import DATA_ROW, Table, split_tables, summary
from commstack.tools import TOOLS, Benchmark


def identify(text: str, untitled: bool = False) -> Benchmark:
    """The benchmark whose output `text` is, from its first own line (the title), as its tool reads it; with
    `untitled` (a job log's), where no tool reads a title there, from the lines a tool prints after its title
    (Tool.untitled: a title cut off when pasted)."""
    lines = own_lines(text).lines
    line, lineno = lines[0]
    try:
        if bench := tools.titled(line):
            return bench
    except UnknownFormatError as e:
        raise UnknownFormatError(e.message, line, lineno) from None
    for tool in TOOLS.values() if untitled else ():
        if tool.untitled and (bench := tool.untitled(lines, 0)):
            return bench
    labels = [t.label for t in TOOLS.values()]
    raise NoTitleError(f"no benchmark title: not {', '.join(labels[:-1])} or {labels[-1]} output", line, lineno)


def parse_tables(text: str) -> list[Sweep]:
    """Every table of one tool's output, the title telling which; no completeness check (see parse_output)."""
    return identify(text).tool.parse(text)


def expected_sizes(bench: Benchmark, sweep: Sweep, args: list[str], ranks: int | None = None) -> tuple[int, int]:
    """(lo, hi) that `args`, or the benchmark's defaults for this output's version, ask for."""
    lo, hi = bench.sizes.requested(args)
    if bench.tool.zero_lo_is_default and lo is not None and lo <= 0:
        lo = None  # OSU refuses a minimum of 0 and keeps its default
    printed = bench.tool.printed_range  # an output that prints the range it runs: where the arguments give none
    if printed and printed[0] in sweep.meta:
        return (sweep.meta[printed[0]] if lo is None else lo), (sweep.meta[printed[1]] if hi is None else hi)
    if lo is None or hi is None:
        default = bench.defaults(sweep.version, sweep.meta.get(TITLE_MISSING, False))
        if default is None:
            raise UnknownFormatError(f"{bench.name} v{sweep.version}: its default sizes are not known here; "
                                     f"give its size arguments ({' '.join(bench.sizes.args('LO', 'HI'))})",
                                     *sweep.title_line)
        lo = default[0] if lo is None else lo
        hi = default[1] if hi is None else hi
    return lo, bench.tool.last_size(bench, sweep, args, ranks, hi)


def failed_checks(sweep: Sweep) -> list[tuple[str | None, Quoted | None]]:
    """Every data check the benchmark reports failed, and the line that says so: its own failure lines first
    (nccl-tests' `# Out of bounds values : N FAILED` among them, as the parser kept them; no reason: the line
    says it), then each Fail row and count of wrong elements."""
    failed: list[tuple[str | None, Quoted | None]] = [(None, quoted) for quoted in sweep.error_lines]
    wrong = [c for c in sweep.columns if COLUMNS[c].wrong]
    for i, row in enumerate(sweep.rows):
        quoted = sweep.row_lines[i] if i < len(sweep.row_lines) else None  # rows cut or built by hand: no line
        if row.get("validation") == "Fail" or row.get("check") == "Fail":
            failed.append((f"data validation failed at {row['size']} B", quoted))
        failed += [(f"{row[c]} wrong elements ({c}) at {row['size']} B", quoted) for c in wrong if row.get(c)]
    return failed


def check(bench: Benchmark, sweep: Sweep, args: list[str], ranks: int | None = None) -> None:
    """Raise the first problem of a parsed sweep: failed validation, or missing sizes."""
    if failed := failed_checks(sweep):
        reason, quoted = failed[0]
        reason = reason or "the benchmark's data check failed"
        raise ValidationFailedError(f"{bench.name}: {reason}", *quoted)
    last_row = sweep.row_lines[-1]
    if sweep.complete is False:
        raise TruncatedError(f"{bench.name}: the output ends before the benchmark's end line", *last_row)
    if bench.tool.sizes_check:  # the tool's own sizes (fi_pingpong's lists, ucx_perftest's one size)
        return bench.tool.sizes_check(bench, sweep, args)
    if not bench.sized:  # barrier, init, hello: one row, no sizes to check
        return
    lo, hi = expected_sizes(bench, sweep, args, ranks)
    last = sweep.rows[-1]["size"]
    following = bench.tool.next_size(sweep, last)
    first = sweep.rows[0]["size"]
    want = bench.tool.first_size(bench, sweep, lo)
    if first > want:
        raise TruncatedError(f"{bench.name}: the sweep starts at {first} B; {want} B comes first in the {lo}..{hi} B "
                             f"asked for: rows are missing", *sweep.row_lines[0])
    if first < want:
        raise UnknownFormatError(f"{bench.name}: the sweep starts at {first} B, below the {want} B its arguments ask "
                                 f"for: the output of other arguments", *sweep.row_lines[0])
    if last > hi:
        raise UnknownFormatError(f"{bench.name}: the sweep goes on to {last} B, past the {lo}..{hi} B its arguments "
                                 f"ask for: the output of other arguments", *last_row)
    if last < hi and following <= hi:
        raise TruncatedError(f"{bench.name}: the sweep stops at {last} B; the next size, {following} B, is within "
                             f"the {lo}..{hi} B asked for", *last_row)


# ---------------------------------------------------------------------------------- tables of one output

Validated = Literal["yes", "no", "failed"]


@dataclass
class Result:
    """One table of an output as `commstack parse` reports it: parsed (as far as it could be) and
    checked, with its own verdict, validation and notes."""

    benchmark: str | None
    first: int
    last: int
    sweep: Sweep | None          # the table, or the rows read before the line its error quotes
    error: ParseError | None
    notes: list[Note]
    check_failed: bool = False   # a table refused for another reason holds the benchmark's failed check

    @property
    def verdict(self) -> str:
        return self.error.kind if self.error else "complete"

    @property
    def validated(self) -> Validated:
        return "failed" if self.check_failed else validated(self.sweep, self.error)


def validated(sweep: Sweep | None, error: ParseError | None = None) -> Validated:
    """Whether the benchmark checked its data: `failed` where a check failed, `yes` where the output shows one ran,
    else `no` (OSU without -c, nccl-tests -c 0: N/A counts and `validation: 0`)."""
    if isinstance(error, ValidationFailedError) or sweep and failed_checks(sweep):
        return "failed"
    if sweep is None:
        return "no"
    wrong = [c for c in sweep.columns if COLUMNS[c].wrong]
    checked = any(v == "Pass" for r in sweep.rows for v in r.values()) \
        or any(r.get(c) is not None for r in sweep.rows for c in wrong) or sweep.meta.get("validation") == 1
    return "yes" if checked and not sweep.meta.get(TITLE_MISSING) else "no"


def _named(table: Table) -> Benchmark | None:
    """The benchmark a table's first line names, where that line is a known title."""
    lines = table.text.splitlines()
    if not lines:  # an empty output: no title
        return None
    try:
        return tools.titled(noise.strip_prefix(lines[table.first - table.offset - 1].rstrip())[0])
    except UnknownFormatError:
        return None


def _partial(table: Table, error: ParseError, lenient: bool) -> Sweep | None:
    """The rows of a table read before the line its error quotes: the table up to its last data row
    above that line, parsed (its last sweep, with the output's line numbers); None where that cut text fails
    too (ucx_perftest's, which has no Final row)."""
    lines = table.text.splitlines()
    data = [i for i in range(error.lineno - 1) if DATA_ROW.match(lines[i])] if error.lineno else []
    if not data:
        return None
    text = "\n".join(lines[:data[-1] + 1]) + "\n"
    try:
        sweeps = identify(text, lenient).tool.parse(text)
    except CommstackError:
        return None
    return table.shift(sweeps[-1]) if sweeps else None


def crashed(table: Table) -> CrashedError | None:
    """An output with no title that holds a crash line the noise table knows (noise.CRASHES): crashed,
    quoting the first."""
    for lineno, line in enumerate(table.text.splitlines(), table.offset + 1):
        line = noise.strip_prefix(line)[0]
        if (known := noise.classify(line, noise.CRASHES)) is not None:
            return CrashedError(f"no benchmark title, and a crash line: {known.source}'s {known.what}", line, lineno)
    return None


def parse_results(text: str, args: list[str], ranks: int | None = None, benchmark: str | None = None,
                  lenient: bool = False) -> list[Result]:
    """Every table of an output, each parsed and checked against `args` on its own: one's failure is
    its verdict, not the others'. `benchmark` (a step's) names the tables of an output that names none.
    `lenient`: a job log, whose unknown lines before the first table and after the last are notes
    (commstack.results.tables.split_tables)."""
    results: list[Result] = []
    tables = split_tables(text, lenient)
    for k, table in enumerate(tables):
        if lenient and k == len(tables) - 1:
            table = without_trailer(table)
        try:
            bench = identify(table.text, lenient)
        except ParseError as e:
            # a crash or Slurm's end: the title still names the benchmark; a table with no (known) title does not
            bench = None if isinstance(e, UnknownFormatError) else _named(table)
            if bench is None:
                error = (isinstance(e, NoTitleError) and crashed(table)) or table.shifted(e)
                results.append(Result(None, table.first, table.last, None, error, table.outside))
                continue
        try:
            sweeps = [table.shift(s) for s in bench.tool.parse(table.text)]
        except ParseError as e:
            partial = _partial(table, e, lenient)
            notes = table.outside + (partial.notes if partial else [])
            # the rows read name it, or the title; a head that names none (nccl-tests' parameter line) does not
            named = partial.benchmark if partial and partial.benchmark else \
                bench.name if bench.name in benchmarks.BENCHMARKS else None
            # its rows were read up to the error's line: a failed check after it (nccl-tests' out-of-bounds
            # footer) still makes it `validated: failed`, never `yes`
            failed = failed_line([noise.strip_prefix(line.rstrip())[0] for line in table.text.splitlines()]) is not None
            results.append(Result(named, table.first, table.last, partial, table.shifted(e), notes, failed))
            continue
        for i, s in enumerate(sweeps):
            if s.benchmark is None:  # an output that names no benchmark (nccl-tests before 2.16.7): the step's
                s.benchmark = benchmark
            try:
                check(benchmarks.get(s.benchmark) if s.benchmark else bench, s, args, ranks)
                error = None
            except ParseError as e:
                error = e  # its line numbers are the output's: the sweep's were shifted
            if i == 0:
                s.notes = sorted(table.outside + s.notes, key=lambda n: n.lineno)
            first = table.first if i == 0 else s.row_lines[0].lineno
            last = table.last if i == len(sweeps) - 1 else sweeps[i + 1].row_lines[0].lineno - 1
            results.append(Result(s.benchmark, first, last, s, error, s.notes))
    return results


def without_trailer(table: Table) -> Table:
    """The last table of a job log, less the lines after it that its parser refuses and a job script
    prints (Table.trailer)."""
    try:
        tool = identify(table.text, untitled=True).tool
    except CommstackError:
        return table  # no title: nothing is after a table
    try:
        tool.parse(table.text)
    except UnknownFormatError as e:
        return table.trailer(e) or table
    except CommstackError:
        pass
    return table


def parse_outputs(text: str, args: list[str], ranks: int | None = None, benchmark: str | None = None) \
        -> list[Sweep]:
    """Every table of one run's output (several with OSU 7.x `-T all`, one per datatype, or a job
    script's transcript), each checked against `args` as in parse_output; the first failure raised.
    `benchmark` (the step's) names the tables of an output that names none."""
    results = parse_results(text, args, ranks, benchmark)
    if failed := next((r.error for r in results if r.error), None):
        raise failed
    return [r.sweep for r in results]


def parse_output(benchmark: str | None, text: str, args: list[str], ranks: int | None = None) -> Sweep:
    """One step's output (stdout decoded with errors="replace"), parsed and checked: complete against `args` (its
    defaults where they give no sizes) and valid, or a ParseError subclass names the kind and quotes the line.
    `benchmark`: the one the step ran (None: the title tells); `ranks`: where OSU's memory limit shortens a sweep."""
    if benchmark is not None:
        first = split_tables(text)[0].text  # a job script's echo before the title is no title
        named = identify(first).name
        if named in benchmarks.BENCHMARKS and named != benchmark:
            raise UnknownFormatError(f"expected {benchmark} output, the title is another benchmark's",
                                     *own_lines(first).lines[0])
    sweeps = parse_outputs(text, args, ranks, benchmark)
    if benchmark is not None and sweeps[0].benchmark != benchmark:  # named after its first line (nccl-tests 2.17.4+)
        raise UnknownFormatError(f"expected {benchmark} output, the title is another benchmark's",
                                 *sweeps[0].title_line)
    if len(sweeps) > 1:
        raise UnknownFormatError(f"{len(sweeps)} tables in one output; a step runs one", *sweeps[1].title_line)
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
    f"{e.exit_status} {e.kind}" for e in PARSE_ERRORS) + "; 2 bad arguments or unreadable FILE"


def describe(result: Result, quote: bool = True) -> dict[str, Any]:
    """What `commstack parse --json` prints for one table: its lines, verdict, validation, notes, and the
    rows read (all of them, or those before the line its error quotes); without `quote` (a file that holds no
    output commstack knows) no line of the file."""
    s, e = result.sweep, result.error
    return {"benchmark": result.benchmark, **{k: getattr(s, k, None) for k in ("tool", "version", "title", "device")},
            "lines": [result.first, result.last], "verdict": result.verdict, "validated": result.validated,
            "error": {"kind": e.kind, "message": e.message, "lineno": e.lineno, "line": e.line if quote else None}
            if e else None,
            "columns": [{"name": c, "unit": COLUMNS[c].unit} for c in s.columns] if s else [],
            "rows": s.rows if s else [], "meta": s.meta if s else {},
            "notes": [{"lineno": n.lineno, "source": n.source, "what": n.what, "line": n.line}
                      for n in result.notes if quote]}


def parse_arguments(args: str, ranks: int | None) -> list[str]:
    """`commstack parse --args` as argv, and --ranks, checked."""
    if ranks is not None and ranks < 1:
        raise CommstackError(f"--ranks {ranks}: a run has 1 rank or more")
    try:
        return shlex.split(args)
    except ValueError as e:
        raise CommstackError(f"--args {args!r}: {e}") from None


def parse_command(path: str, argv: list[str], as_json: bool, ranks: int | None, strict: bool = False) -> int:
    """`commstack parse FILE` (docs/harness.md#parsing-any-output-commstack-parse): each table's rows, verdict,
    validation and notes, each failure on stderr; `strict`: a step's rule. Returns the exit status."""
    results, stopped = read_results(Path(path), argv, ranks, strict)
    # a file with no benchmark's title in it may be anything (a secret given by mistake): none of it is shown, but
    # under a step's rule (--strict), which holds the file to be an output and names the line that breaks it
    quote = strict or not any(isinstance(r.error, NoTitleError) for r in results)
    for r in results:
        if r.error:
            print(f"commstack parse: {path}: {r.error.kind}: {r.error.message}", file=sys.stderr)
            if quote and r.error.line is not None:
                print(f"  line {r.error.lineno}: {printable(r.error.line)}", file=sys.stderr)
    if stopped:
        print(f"commstack parse: {path}: read {stopped} lines: the failure above settles the verdict, whatever "
              "follows", file=sys.stderr)
    if as_json:
        print(json.dumps([describe(r, quote) for r in results], indent=1))
    else:
        for r in results:
            rows = r.sweep.rows if r.sweep else []
            sizes = f", {rows[0]['size']}..{rows[-1]['size']} B" if rows else ""
            what = f"{r.benchmark} ({r.sweep.title or 'no title'})" if r.sweep else (r.benchmark or "no table")
            print(f"lines {r.first}-{r.last}: {what}: {len(rows)} rows{sizes}, {r.verdict}, validated: {r.validated}"
                  + (f"; {len(r.notes)} note(s)" if r.notes else ""))
            for line in summary(r.notes):
                print(f"  {line}")
            for n in r.notes if quote else ():  # a job log's line may hold anything: its escapes shown, never raw
                print(printable(f"  note {n}"))
    return exit_status(results)


def read_results(path: Path, argv: list[str], ranks: int | None, strict: bool) -> tuple[list[Result], int | None]:
    """The checked tables of the output in `path`, read as far as its verdict needs, and the lines read
    when that was not all of it."""
    return settle.read_results(path, lambda text: parse_results(text, argv, ranks, lenient=not strict),
                               lambda r: r.error)


def exit_status(results: list[Result]) -> int:
    failed = next((r.error for r in results if r.error), None)
    return failed.exit_status if failed else exits.PASS
