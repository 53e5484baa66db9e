"""Named errors. Each carries what a user needs to act on it; raw output is kept by the caller."""

import re
import unicodedata

from commstack import exits


class CommstackError(Exception):
    """Base of every error the harness raises on purpose.

    `kind` names it in records, reports and `commstack parse`: its class's name in kebab case, less "Error"
    (BadNumberError: bad-number), unless the class sets another; `exit_status` ends a command (commstack.exits)."""

    kind = "error"
    exit_status = exits.USAGE

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "kind" not in cls.__dict__:
            cls.kind = re.sub(r"(?<!^)(?=[A-Z])", "-", cls.__name__.removesuffix("Error")).lower()


class ConfigError(CommstackError):
    """A system, suite or reference file is missing or malformed."""


class ParseError(CommstackError):
    """Output that is not a complete, valid benchmark table; quotes the offending line."""

    kind = "parse-error"

    def __init__(self, message: str, line: str | None = None, lineno: int | None = None, **launch):
        line = cut(line) if line is not None else None
        self.message, self.line, self.lineno = message, line, lineno
        where = f" (line {lineno}: {line!r})" if line is not None else ""
        super().__init__(message + where, **launch)  # NodeFailureError's raw, for LaunchError

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.exit_status = exits.Status[cls.kind.upper().replace("-", "_")]  # what `parse` exits with


class EmptyOutputError(ParseError):
    """No benchmark output at all (nothing, or only warnings)."""

    kind = "empty"


class UnknownFormatError(ParseError):
    """A title, header or line that no known format has."""


class NoTitleError(UnknownFormatError):
    """No line of the output is a benchmark's title (a job log's first part may hold none yet)."""

    kind = "unknown-format"


class BadNumberError(ParseError):
    """A value where a number (or a byte count) should be is not one."""


class TruncatedError(ParseError):
    """The sweep misses sizes its arguments, or the benchmark's defaults, ask for (first or last), or ends mid-row."""


class ValidationFailedError(ParseError):
    """The benchmark's own data check failed (a Fail row, wrong elements, a validation error line)."""


class CrashedError(ParseError):
    """The output holds a launcher error line, an MPI abort or a signal: a rank died."""


class TimedOutError(ParseError):
    """Slurm cancelled the step at its time limit (`... CANCELLED AT ... DUE TO TIME LIMIT ***`)."""


class LaunchError(CommstackError):
    """A step did not run to the end; `raw` points at the kept output."""

    def __init__(self, message: str, raw: str | None = None):
        self.raw = raw
        super().__init__(message + (f" (raw output: {raw})" if raw else ""))


class NodeFailureError(ParseError, LaunchError):
    """A node failed under the step: Slurm cancelled it (`... DUE TO NODE FAILURE ***` in its output, a
    ParseError quoting the line), or srun said so when the step ended (a LaunchError naming its raw output)."""


#: every parse error kind, for `commstack parse --help` and reports: the classes above, in their order
PARSE_ERRORS = tuple(ParseError.__subclasses__())


class SlurmUnavailableError(LaunchError):
    pass


class ControllerLostError(SlurmUnavailableError):
    """slurmctld stopped answering during a run (`scontrol ping` fails, or a client timed out).
    Launcher.run raises it for the step that met it and, without launching anything, for every
    later step: the caller marks those steps not-run and cleans up (leaving the Allocation, LocalSlurm.stop)."""


class AllocationLostError(SlurmUnavailableError):
    """The run's allocation ended under it (cancelled, past its time limit, or a SLURM_JOB_ID that names no
    running job): like ControllerLostError, for the step that met it and, unlaunched, every later one."""


class BinaryNotFoundError(LaunchError):
    pass


class PairFailedError(LaunchError):
    """A server/client step whose pair did not meet or run (commstack.run.pair's named error)."""


class StepTimeoutError(LaunchError):
    kind = "timed-out"


class StepCrashedError(LaunchError):
    """Non-zero exit or a signal."""

    kind = "crashed"


class SrunError(LaunchError):
    """srun refused the step (bad option, resources unavailable, ...)."""

    kind = "srun-refused"


class MissingPackageError(CommstackError):
    """A command's module imports a Python package its venv lacks: a smaller requirement set, such as
    the images' requirements/spack.txt (the Spack commands alone)."""


class InputFileError(CommstackError):
    """An input file (suite, system, references, record, plan, a benchmark output to parse) that is not a
    regular file or is over its size limit: refused before it is read."""


#: Unicode categories a terminal or a file name must not get raw: controls (C0, DEL, C1), format characters (bidi
#: overrides such as U+202E, zero-width ones), line and paragraph separators, lone surrogates
UNSHOWN = ("Cc", "Cf", "Zl", "Zp", "Cs")


def has_control(text: str, allow: str = "") -> str | None:
    """The first control or format character of `text` (outside `allow`), or None."""
    return next((c for c in text if unicodedata.category(c) in UNSHOWN and c not in allow), None)


def printable(text: str, keep: str = "") -> str:
    """`text` with every control and format character (but those in `keep`, e.g. "\\n") shown as its escape,
    \\x1b or \\u202e: what input put in a message cannot retitle a terminal or reorder a line."""
    return "".join(c if unicodedata.category(c) not in UNSHOWN or c in keep
                   else f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" for c in text)


class OutputTooLargeError(LaunchError):
    """A step printed more than the limit per stream (COMMSTACK_OUTPUT_LIMIT_MIB): it was stopped, and
    its output up to the limit is kept."""


class EmbeddedSlurmNeedsRootError(SlurmUnavailableError):
    """The embedded Slurm runs its daemons as root (SlurmUser=root): a user without it gets this, once."""


#: characters of a line kept where it is shown or stored (messages, records, reports); raw files keep all
LINE_LIMIT = 200


def cut(line: str) -> str:
    """`line` as shown and stored: at most LINE_LIMIT characters, and how many more there were."""
    return line if len(line) <= LINE_LIMIT else f"{line[:LINE_LIMIT]}... ({len(line) - LINE_LIMIT} more characters)"
