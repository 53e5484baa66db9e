"""An output cut into its tables at their titles, before each is parsed (commstack.results.parse): which
line is a title some tool reads, and which unknown text stands between two tables as a note."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from commstack.errors import ParseError, UnknownFormatError, cut
from commstack.tools import noise
from commstack.tools.lines import CRASH, EXITED, SLURM_ENDED, VALIDATION_ERROR, Quoted, Sweep
from commstack.tools.noise import Note
from commstack.tools import TOOLS

# a table's data row starts with a number (OSU, nccl-tests) after blanks; ucx_perftest's with its prefix
DATA_ROW = re.compile(r"\s*[-+]?\d|Final: |\[thread \d+\]")
# a job log's line that starts with its date and time (an orchestrator's status, Python's logging): no row does
LOG_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d")


def _reads(read: Callable[[], object]) -> bool:
    """Whether a tool reads it: `read`'s answer, or an UnknownFormatError (a benchmark of its own it does not know)."""
    try:
        return bool(read())
    except UnknownFormatError:
        return True


def is_title(line: str) -> bool:
    """Whether a line is a title some tool reads (a known or an unknown benchmark of its own)."""
    return any(_reads(lambda: tool.title(line)) for tool in TOOLS.values())


def untitled_start(lines: list[str]) -> int | None:
    """Where the first table whose title is missing starts (its first line after the cut title), as a tool reads
    one (Tool.untitled, several benchmarks printing it too); None where none does."""
    numbered = [Quoted(line, i) for i, line in enumerate(lines)]  # the numbers only mark the start: no message
    return next((i for i in range(len(lines)) if any(tool.untitled and _reads(lambda: tool.untitled(numbered, i))
                                                     for tool in TOOLS.values())), None)


def _outside(line: str) -> bool:
    """An unknown line that may stand between two tables as a note: text that is no row, comment, crash
    or the benchmark's own failure line (those belong to the table before them); known lines stay where
    they are, notes of the table they stand in (commstack.tools.lines)."""
    return bool(line.strip()) and not line.lstrip().startswith("#") \
        and (not DATA_ROW.match(line) or bool(LOG_TIME.match(line))) \
        and not VALIDATION_ERROR.match(line) and not CRASH.search(line) and not EXITED.search(line) \
        and not any(p.search(line) for p, _, _ in SLURM_ENDED) and noise.classify(line) is None \
        and noise.classify(line, noise.CRASHES) is None \
        and not any(g.regex.search(line) for g in noise.GLUED)


@dataclass
class Table:
    """The lines of one table of an output: from its title (or the output's start) to the line before the
    next table's title, lines outside any table blanked; `offset` lines of the output come before `text`."""

    first: int
    last: int
    text: str
    offset: int = 0
    outside: list[Note] = field(default_factory=list)  # lines before or after it that no table holds

    def shifted(self, e: ParseError) -> ParseError:
        """The error with the output's line number."""
        return type(e)(e.message, e.line, e.lineno + self.offset) if self.offset and e.lineno else e

    def trailer(self, e: UnknownFormatError) -> Table | None:
        """The last table without the job log's lines after it: from the line its parser refused (`e`)
        to the end, every line blank, known (a note of the table) or a job script's (a note here); None
        where one is the benchmark's (a row, a comment, a crash line): the table's own error stands."""
        lines = self.text.splitlines()
        if not e.lineno or e.lineno > len(lines):
            return None
        own = [noise.strip_prefix(line.rstrip())[0] for line in lines]
        framed = noise.framed(own)
        after = [i for i in range(e.lineno - 1, len(lines)) if own[i].strip() and i not in framed
                 and noise.classify(own[i]) is None]
        if not after or not all(_outside(own[i]) for i in after):
            return None
        text = "\n".join("" if i in after else line for i, line in enumerate(lines)) + "\n"
        notes = [Note(cut(own[i]), self.offset + i + 1, "unknown", AFTER) for i in after]
        return dataclasses.replace(self, text=text, outside=self.outside + notes)

    def shift(self, sweep: Sweep) -> Sweep:
        """The sweep with the output's line numbers."""
        n = self.offset
        sweep.title_line = Quoted(sweep.title_line.text, sweep.title_line.lineno + n)
        sweep.row_lines = [Quoted(line, i + n) for line, i in sweep.row_lines]
        sweep.error_lines = [Quoted(line, i + n) for line, i in sweep.error_lines]
        sweep.notes = [dataclasses.replace(note, lineno=note.lineno + n) for note in sweep.notes]
        return sweep


def split_tables(text: str, lenient: bool = False) -> list[Table]:
    """An output cut into its tables at their titles: a title starts a table once the one before has a data row (a
    version line, then a start line, then a parameter line are one table's head; OSU 7.2 osu_mbw_mr prints its title
    twice). Unknown text between a table's last row and the next title is a note of neither table; before the first
    title and after the last table it is one only when `lenient` (a job log, Table.trailer; else the table's own, an
    error: docs/harness.md#parsing-any-output-commstack-parse). A job log with no title has its table start where a
    tool reads a table whose title was cut (untitled_start)."""
    raw = text.splitlines()
    lines = [noise.strip_prefix(line.rstrip())[0] for line in raw]
    framed = noise.framed(lines)  # a help box's lines are known: notes of the table they stand in
    starts: list[int] = []
    rows = False
    for i, line in enumerate(lines):
        if is_title(line):
            if not starts or rows:
                starts.append(i)
                rows = False
        elif starts and DATA_ROW.match(line) and noise.classify(line) is None:
            rows = True
    if not starts and lenient and (untitled := untitled_start(lines)) is not None:
        starts.append(untitled)
    if not starts:
        return [Table(1, len(raw), text)]
    bounds = list(zip(starts, starts[1:] + [len(raw)]))
    placed = [(i, BEFORE) for i in range(starts[0] if lenient else 0)]
    for begin, end in bounds[:-1]:  # after the last table's last row, text is that table's: junk to refuse
        data = [i for i in range(begin, end) if DATA_ROW.match(lines[i])]
        placed += [(i, BETWEEN) for i in range(data[-1] + 1 if data else end, end)]
    outside = {i: where for i, where in placed if i not in framed and _outside(lines[i])}  # in line order
    tables = []
    for k, (begin, end) in enumerate(bounds):
        start = 0 if k == 0 else begin
        body = "\n".join("" if i in outside else raw[i] for i in range(start, end))
        body += "\n" if end < len(raw) or text.endswith("\n") else ""
        notes = [Note(cut(lines[i]), i + 1, "unknown", where) for i, where in outside.items() if start <= i < end]
        tables.append(Table(begin + 1, end, body, start, notes))
    return tables


BETWEEN, BEFORE, AFTER = "a line between two tables", "a line of the job log before the first table", \
    "a line of the job log after the last table"


def summary(notes: list[Note]) -> list[str]:
    """The job log's own lines around the tables, counted: "12 lines of the job log before the first table"."""
    counts = Counter(note.what for note in notes)
    return [f"{counts[where]} {where.replace('a line', 'lines' if counts[where] > 1 else 'line', 1)}"
            for where in (BEFORE, BETWEEN, AFTER) if counts[where]]
