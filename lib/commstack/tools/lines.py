"""A parsed table (Sweep) and the line machinery every tool's parser shares: `own_lines` sorts an output
into the benchmark's own lines, notes (commstack.tools.noise) and errors naming their kind and quoting the
line (commstack.errors.PARSE_ERRORS; docs/harness.md#parsing-any-output-commstack-parse)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from commstack.errors import (BadNumberError, CrashedError, EmptyOutputError, NodeFailureError, ParseError,
                              TimedOutError, TruncatedError, UnknownFormatError, ValidationFailedError, cut)
from commstack.tools import noise
from commstack.tools.noise import Note


#: a Sweep's meta key: its table had no title (cut when pasted), so its benchmark is inferred, its check not vouched for
TITLE_MISSING = "title_missing"


class Quoted(NamedTuple):
    """A line of an output and its number, in ParseError's order: `ParseError(message, *quoted)`."""

    text: str
    lineno: int


@dataclass
class Sweep:
    """One benchmark's table: rows keyed by canonical column names (its tool's columns)."""

    tool: str  # the tool's name (commstack.tools)
    benchmark: str  # osu_bw, all_reduce_perf, mpi-pingpong, ...
    title: str
    version: str | None
    device: str | None  # CUDA, ROCM, ... when the buffers are on a device
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)  # known lines that are not the benchmark's (tools.noise)
    complete: bool | None = None  # the format's own end marker was seen; None: the format has none
    # each row's line, each failure line the benchmark printed, and the title's
    row_lines: list[Quoted] = field(default_factory=list, repr=False)
    error_lines: list[Quoted] = field(default_factory=list, repr=False)
    title_line: Quoted = Quoted("", 0)

    @property
    def sizes(self) -> list[int]:
        return [r["size"] for r in self.rows]

    def row(self, size: int) -> dict[str, Any]:
        for r in self.rows:
            if r["size"] == size:
                return r
        raise KeyError(f"{self.benchmark}: no row for size {size}")


# A launcher error line, an MPI abort or a signal, anywhere in a line: a rank died.
CRASH = re.compile(
    r"srun: error: |srun: Terminating StepId=|srun: Job step aborted|srun: forcing job termination"
    r"|slurmstepd(?:-\S+)?: error: |\*\*\* Process received signal \*\*\*|exited on signal \d+"
    r"|\b(?:Segmentation fault|Bus error|Floating point exception|Illegal instruction)\b"
    r"|application called MPI_Abort|MPI_ABORT was invoked on rank \d+|\*\*\* An error occurred in MPI_\w+"
    r"|\*\*\* MPI_ERRORS_ARE_FATAL"
    r"|BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
    r"|^(?:Killed|Aborted)(?: \(core dumped\))?$|Test (?:NCCL|CUDA) failure"
    # MPICH and its derivatives: Intel MPI's `Abort(N) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init`,
    # Cray MPICH's `MPICH ERROR [Rank 0] [job id 1.0] [date] [node] - Abort(N) ...`, MPICH's `Fatal error in
    # MPI_Win_fence: ..., error stack:` and `Assertion failed in file F at line N: ...`; UCX's
    # `[host:pid:0:tid] Caught signal 7 (Bus error ...)` and its `==== backtrace (tid: N) ====`
    r"|^Abort\(\d+\) on node \d+ |^MPICH ERROR \[Rank \d+\] |^Fatal error in P?MPI_\w+: |Caught signal \d+ \("
    r"|^Assertion failed in file \S+ at line \d+: "
    # Slurm's word that it cancelled the job or step (scancel, a time limit: SLURM_ENDED tells those first),
    # also without slurmstepd's prefix: `*** JOB 123456 ON nid001234 CANCELLED AT 2024-05-01T10:00:00 ***`
    r"|\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT "
    # a job script's shell on a command it ran that a signal ended: `bash: line 8:  3881 Killed   timeout ...`
    r"|^\S+: line \d+: +\d+ (?:Killed|Terminated|Aborted|Hangup|Quit)(?: \(core dumped\))? "
    r"|^==== backtrace \(tid: *\d+\) ====$")
# mpirun's word that a rank exited non-zero: a crash too, told only where no line above says more
EXITED = re.compile(r"returned\s+a non-zero exit code"
                    r"|^Primary job\s+terminated normally, but \d+ process(?:es)? returned$"
                    r"|^mpirun detected that one or more processes exited with non-zero status")
# a non-zero nccl-tests wrong-element count as %g prints it: 96, 1.04858e+06 (not 2.0's deviation 2e+00)
NCCL_WRONG = r"(?:[1-9]\d*|[1-9](?:\.\d+)?e\+(?:0[6-9]|[1-9]\d))"
# The benchmark's own word that its data check failed: OSU 7.x (`DATA VALIDATION ERROR: <path> exited
# with status 1 on message size 64.`, after a Fail row, then it exits 1) and mpi-pingpong print it
VALIDATION_ERROR = re.compile(r"^DATA VALIDATION ERROR: ")
# a Fail row (OSU: Fail or failed in the last column; mpi-pingpong: Check: Fail; nccl-tests: wrong
# elements out of place or in place, out-of-bounds values), or that line
VALIDATION_FAILED = re.compile(r"^DATA VALIDATION ERROR: |^\d+\s.*\s(?:Fail|failed)$|, Check: Fail$"
                               r"|^\s*\d+\s+\d+\s+\w+\s+(?:\w+\s+)?-?\d+(?:\s+\S+){3}\s+(?:"
                               + NCCL_WRONG + r"(?:\s+\S+){4}|(?:\S+\s+){4}" + NCCL_WRONG + "|" + NCCL_WRONG + ")$"
                               r"|^# Out of bounds values : \d+ FAILED$")


def failed_line(lines: list[str]) -> Quoted | None:
    """The first of an output's lines (their launcher prefix stripped) that says a data check failed: a known
    launcher line that ends in `failed` (Open MPI's `2 more processes have sent help message ... failed`) says
    nothing of it."""
    return next((Quoted(line, lineno) for lineno, line in enumerate(lines, 1)
                 if VALIDATION_FAILED.search(line) and noise.classify(line) is None), None)


# Why Slurm ended a step, wherever it stands among the crash lines that follow from it
# (slurmstepd-<node>: error: *** STEP 1.3 ON node1 CANCELLED AT ... DUE TO NODE FAILURE, SEE SLURMCTLD LOG ... ***)
SLURM_ENDED = [(re.compile(r"DUE TO NODE FAILURE|^srun: error: Node failure on \S+$"), NodeFailureError,
                "Slurm ended the step: a node failed"),
               (re.compile(r"DUE TO TIME LIMIT"), TimedOutError, "Slurm ended the step at its time limit")]

# a known line whose text ends like a table row (a size, then figures, one with a decimal point) may have
# swallowed one; NCCL INFO lines that end in integers (ranks, channels) do not
ROW_TAIL = re.compile(r"(?:^|\s)\d+(?:\s+(?:[-+]?[\d.]+(?:[eE][-+]?\d+)?|Pass|Fail|passed|failed)){1,12}\s*$")
DECIMAL = re.compile(r"\d\.\d")
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]\d+)?")  # as printf writes them: 1.5, -1, 1.9164e+03
# a field of a table row: a number, a Pass/Fail word, or nccl-tests' type, op, root and N/A
ROW_FIELD = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|Pass|Fail|passed|failed|N/A|Transfer"
                       r"|[a-z][a-z0-9_]*")


@dataclass
class Text:
    """The benchmark's own lines of an output, with the known warnings taken out."""

    lines: list[Quoted]
    notes: list[Note]
    cut: bool  # the last of `lines` ends the output without a newline: it may be cut short
    mem_limit: int | None = None  # OSU's "Limiting max message size to: N"


def own_lines(text: str) -> Text:
    """The benchmark's own lines, launchers' prefixes stripped (noise.PREFIXES); every known line that is
    not the benchmark's a note (noise.PATTERNS, FRAMES, GLUED); crash and Slurm lines raised."""
    if not text.strip():
        raise EmptyOutputError("the output is empty")
    out = Text([], [], False)
    lines, glued = [], []
    for lineno, line in enumerate(text.splitlines(), 1):
        rest, prefix = noise.strip_prefix(line.rstrip())
        if prefix is noise.PRRTE_NUL:
            glued.append(Note(line[:len(line) - len(rest)], lineno, prefix.source, prefix.what))
        line = rest
        for g in noise.GLUED:
            for m in list(g.regex.finditer(line)):
                glued.append(Note(cut(m.group(0)), lineno, g.source, g.what))
                if m.groupdict().get("limit"):
                    out.mem_limit = int(m.group("limit"))
            line = g.regex.sub("", line).rstrip()
        lines.append(line)
    framed = noise.framed(lines)
    exited: Quoted | None = None
    # the benchmark's failed data check comes first: the crash lines after it are its consequence
    failed = failed_line(lines)

    def ended(error: type[ParseError], message: str, line: str, lineno: int) -> ParseError:
        if failed:
            return ValidationFailedError(f"the benchmark's data check failed, then: {message}", *failed)
        return error(message, line, lineno)
    for pattern, error, message in SLURM_ENDED:
        for lineno, line in enumerate(lines, 1):
            if pattern.search(line):
                raise ended(error, message, line, lineno)
    for lineno, line in enumerate(lines, 1):
        out.notes += [n for n in glued if n.lineno == lineno]
        if not line.strip():
            continue
        if CRASH.search(line):
            raise ended(CrashedError, "a launcher error line, an MPI abort or a signal: a rank died", line, lineno)
        if EXITED.search(line):
            exited = exited or Quoted(line, lineno)
        if lineno - 1 in framed:
            frame = framed[lineno - 1]
            out.notes.append(Note(cut(line), lineno, frame.source, frame.what))
            continue
        known = noise.classify(line)
        if known is not None:
            if ROW_TAIL.search(line) and DECIMAL.search(ROW_TAIL.search(line).group(0)):
                raise UnknownFormatError("a known line ends like a table row: a row may be glued to it", line, lineno)
            out.notes.append(Note(cut(line), lineno, known.source, known.what))
            continue
        out.lines.append(Quoted(line, lineno))
    if exited:
        raise ended(CrashedError, "the launcher says a rank exited with a non-zero status", *exited)
    if not out.lines:
        raise EmptyOutputError(f"no benchmark output, only {len(out.notes)} warning line(s)",
                               out.notes[0].line, out.notes[0].lineno)
    # a launcher's line after it (PRRTE's NUL byte alone) leaves the benchmark's last line whole
    out.cut = not text.endswith("\n") and out.lines[-1].lineno == len(lines)
    return out


def tool_error(tool: str, meanings: list[tuple[re.Pattern, str]], what: str, line: str, lineno: int) -> CrashedError:
    """A tool's own error line: crashed, saying what it means where `meanings` know it, else `what`."""
    why = next((meaning for pattern, meaning in meanings if pattern.search(line)), what)
    return CrashedError(f"{tool}: {why}", line, lineno)


def number(text: str, line: str, lineno: int, pattern: re.Pattern = NUMBER) -> float:
    if not pattern.fullmatch(text):
        raise BadNumberError(f"not a number: {text!r}", line, lineno)
    value = float(text)
    if not math.isfinite(value):
        raise BadNumberError(f"non-finite value {text!r}", line, lineno)
    return value


def count(text: str, line: str, lineno: int) -> int:
    if not text.isascii() or not text.isdigit():
        raise BadNumberError(f"{text!r} is not a count", line, lineno)
    return int(text)


def finished(t: Text, sweeps: list[Sweep]) -> list[Sweep]:
    """The tables of an output read to its end: a last row without its newline may have been cut inside a number
    (the programs end every row); each note to the table it appears in (those before the first title to the first)."""
    last = t.lines[-1]
    if t.cut and any(s.row_lines and s.row_lines[-1] == last for s in sweeps):
        raise TruncatedError("the output ends inside its last row (no newline after it)", *last)
    # a table starts at its title; a datatype table of 7.x -T all (same title) at its first row
    starts = [-1] + [s.row_lines[0].lineno if s.title_line == p.title_line else s.title_line.lineno
                     for p, s in zip(sweeps, sweeps[1:])] + [math.inf]
    for i, s in enumerate(sweeps):
        s.notes = [n for n in t.notes if starts[i] <= n.lineno < starts[i + 1]]
    return sweeps


def read_output(text: str, tables: Callable[[Text], list[Sweep]]) -> list[Sweep]:
    """Every table of an output, as `tables` reads its own lines, finished; a number that is none on the last
    line, without its newline (`6374.`): the output was cut there."""
    t = own_lines(text)
    try:
        return finished(t, tables(t))
    except BadNumberError as e:
        if t.cut and e.lineno == t.lines[-1].lineno:
            raise TruncatedError(f"the output ends mid-row ({e.message})", e.line, e.lineno) from None
        raise


def cut_row(t: Text, line: str, lineno: int, message: str, want: int | None = None) -> ParseError:
    """A row that does not fit: cut short when it is the last line, has no newline and starts like a
    row; text glued to a whole row (`want` fields) when the row is there; else a format error."""
    fields = line.split()
    if want and len(fields) > want:
        for where, row, rest in (("end", fields[:want], line.split(None, want)[-1]),
                                 ("start", fields[-want:], line.rsplit(None, want)[0])):
            if all(ROW_FIELD.fullmatch(f) for f in row):
                return UnknownFormatError(f"text glued to the {where} of a row: {rest.strip()!r}", line, lineno)
    if lineno == t.lines[-1].lineno and t.cut and ROW_FIELD.fullmatch(fields[0]):
        return TruncatedError(f"the output ends mid-row ({message})", line, lineno)
    return UnknownFormatError(message, line, lineno)
