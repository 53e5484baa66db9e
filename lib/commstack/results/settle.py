"""An output file read only as far as its verdict needs (`commstack parse`): in growing parts, until a failure
is settled by a line that the lines after it cannot change (docs/harness.md#parsing-any-output-commstack-parse),
in a time and memory that do not grow with the output.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from commstack.errors import EmptyOutputError, InputFileError, NoTitleError, ParseError, TruncatedError
from commstack.files import MAX_OUTPUT, open_bounded

FIRST_LINES = 2048  # the first part read; each next one four times as many lines
#: lines read past a failure before it settles the verdict: a Slurm reason, or the failed data check that crash
#: lines follow from, is printed just after them and outranks them (commstack.tools.lines)
MARGIN = 256
UNSETTLED = (TruncatedError, EmptyOutputError)  # more lines may complete these
TITLE_WITHIN = 100_000  # lines read with no title among them: no benchmark's output (no job log's preamble is so long)

R = TypeVar("R")


def settled(error: ParseError, read: int) -> bool:
    """Whether a failure found in the first `read` lines of a longer output stands, whatever follows."""
    if isinstance(error, NoTitleError):
        return read >= TITLE_WITHIN
    return not isinstance(error, UNSETTLED) and bool(error.lineno) and error.lineno <= read - MARGIN


def read_results(path: Path, parse: Callable[[str], list[R]], error: Callable[[R], ParseError | None],
                 limit: int = MAX_OUTPUT) -> tuple[list[R], int | None]:
    """`parse` of the output in `path` (at most `limit` bytes, decoded with errors="replace"), read in
    growing parts until a failure is settled (`error` gives a result's): (the results up to the first
    failure, the lines read) when it stopped early, else (every result, None)."""
    lines: list[bytes] = []
    size, want = 0, FIRST_LINES
    with open_bounded(path, limit, follow_symlinks=False) as f:  # a link planted where an output was expected
        while True:
            while len(lines) < want:
                try:
                    line = f.readline(limit + 1 - size)
                except OSError as e:
                    raise InputFileError(f"{path}: cannot read: {e.strerror}") from None
                if not line:
                    break
                size += len(line)
                if size > limit:
                    raise InputFileError(f"{path}: more than the {limit} bytes commstack reads from one input file")
                lines.append(line)
            results = parse(b"".join(lines).decode(errors="replace"))
            if len(lines) < want or not f.peek(1):  # the part is the whole output
                return results, None
            first = next((i for i, r in enumerate(results) if error(r)), None)
            if first is not None and settled(error(results[first]), len(lines)):
                return results[:first + 1], len(lines)
            want *= 4
