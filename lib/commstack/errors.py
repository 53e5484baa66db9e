"""Named errors. Each carries what a user needs to act on it; raw output is kept by the caller."""


class CommstackError(Exception):
    """Base of every error the harness raises on purpose."""


class ConfigError(CommstackError):
    """A system, suite or reference file is missing or malformed."""


class UnknownSystemError(ConfigError):
    pass


class ParseError(CommstackError):
    """Output that does not fit the format its header announced; quotes the line."""

    def __init__(self, message: str, line: str | None = None, lineno: int | None = None):
        self.line, self.lineno = line, lineno
        where = f" (line {lineno}: {line!r})" if line is not None else ""
        super().__init__(message + where)


class UnknownFormatError(ParseError):
    """No known benchmark header was found, or the header names unknown columns."""


class LaunchError(CommstackError):
    """A step did not run to the end; `raw` points at the kept output."""

    def __init__(self, message: str, raw: str | None = None):
        self.raw = raw
        super().__init__(message + (f" (raw output: {raw})" if raw else ""))


class SlurmUnavailableError(LaunchError):
    pass


class ControllerLostError(SlurmUnavailableError):
    """slurmctld stopped answering during a run (`scontrol ping` fails, or a client timed out).
    Launcher.run raises it for the step that met it and, without launching anything, for every
    later step: the caller marks those steps not-run and cleans up (Allocation.release, LocalSlurm.stop)."""


class BinaryNotFoundError(LaunchError):
    pass


class StepTimeoutError(LaunchError):
    pass


class NodeFailureError(LaunchError):
    pass


class StepCrashedError(LaunchError):
    """Non-zero exit or a signal."""


class SrunError(LaunchError):
    """srun refused the step (bad option, resources unavailable, ...)."""
