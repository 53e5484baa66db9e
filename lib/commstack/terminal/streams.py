"""The streams of commstack's view of a run: the terminal, out of reach of pytest's capture, and pytest.log."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

from commstack.files import drop_stdout


class Output(io.TextIOBase):
    """The view's stream: a duplicate of stdout's descriptor, out of reach of pytest's capture (which
    points descriptor 1 at a file while a step runs). A reader that went away (`| head -1`) ends the
    output, not the run: from then on it writes to /dev/null."""

    def __init__(self) -> None:
        try:
            self.fd = os.dup(sys.stdout.fileno())
            self.file = open(self.fd, "w", encoding=sys.stdout.encoding or "utf-8", errors="replace")
        except (AttributeError, OSError, ValueError):  # a stdout without a descriptor (main() called in process)
            self.fd, self.file = None, sys.stdout
        self.gone = False

    def _guarded(self, op, *args) -> None:
        if self.gone:
            return
        try:
            op(*args)
        except BrokenPipeError:
            self.gone = True
            if self.fd is not None:
                drop_stdout(self.fd)

    def write(self, s: str) -> int:
        self._guarded(self.file.write, s)
        return len(s)

    def flush(self) -> None:
        self._guarded(self.file.flush)

    def isatty(self) -> bool:
        return self.file.isatty()

    def fileno(self) -> int:
        return super().fileno() if self.fd is None else self.fd  # None: io.UnsupportedOperation

    def close(self) -> None:
        self.flush()
        if self.fd is not None:
            with contextlib.suppress(OSError):
                self.file.close()
        self.gone = True
        super().close()


class PytestLog(io.TextIOBase):
    """pytest's own output: results/<run>/pytest.log, and `echo` (the terminal) with -v. The file is
    made on pytest's first write, once pytest checked that the results directory is new; a file that
    cannot be written (a full file system) costs the log, not the run."""

    def __init__(self, path: Path, echo: io.TextIOBase | None):
        self.path, self.echo = path, echo
        self.file: io.TextIOBase | None = None
        self.error: OSError | None = None

    def write(self, s: str) -> int:
        if self.error is None:
            try:
                self.file = self.file or open(self.path, "x", encoding="utf-8", errors="backslashreplace", buffering=1)
                self.file.write(s)
            except OSError as e:
                self.error, self.file = e, None
        if self.echo:
            self.echo.write(s)
        return len(s)

    def flush(self) -> None:
        if self.echo:
            self.echo.flush()

    def isatty(self) -> bool:
        return False  # no colour codes in the log, nor in pytest's lines echoed beside the view's

    def close(self) -> None:
        if self.file is not None:
            with contextlib.suppress(OSError):
                self.file.close()
        super().close()
