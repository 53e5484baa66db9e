"""How a `commstack` command ends: every exit status of every command in one table (docs/harness.md#exit-statuses;
a named error carries its own as `exit_status`), and the signals that end a run (CtrlC).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from enum import IntEnum, unique
from typing import Protocol


@unique
class Status(IntEnum):
    """An exit status; its meaning is what `run`, `suite`, `status` and `report` print after it. `parse` exits
    with its first failure's kind, in a block of its own (10 and up, commstack.errors.PARSE_ERRORS)."""

    meaning: str

    def __new__(cls, value: int, meaning: str) -> Status:
        status = int.__new__(cls, value)
        status._value_, status.meaning = value, meaning
        return status

    PASS = 0, "every step ran and passed"  # compare: no difference; screen: no bad node or pair; lock: no drift
    FAILED = 1, "some step did not pass"  # a difference, a bad node or pair, a drifted lock or image
    USAGE = 2, "bad input, named below"  # a damaged record, plan or history included
    NOT_RUN = 3, "every step that ran passed, but some did not run (--allow-not-run accepts that)"
    PENDING = 4, "the batch job has not ended yet"  # `commstack status`
    UNWRITTEN = 5, "the results could not all be written"  # a full or read-only file system
    EMPTY = 10, "parse: empty"  # its first failure's kind (commstack.errors, each class's docstring)
    UNKNOWN_FORMAT = 11, "parse: unknown-format"
    BAD_NUMBER = 12, "parse: bad-number"
    TRUNCATED = 13, "parse: truncated"
    VALIDATION_FAILED = 14, "parse: validation-failed"
    CRASHED = 15, "parse: crashed"
    TIMED_OUT = 16, "parse: timed-out"
    NODE_FAILURE = 17, "parse: node-failure"
    HANGUP = 128 + signal.SIGHUP, "interrupted by SIGHUP"
    INTERRUPTED = 128 + signal.SIGINT, "interrupted (Ctrl-C)"
    QUIT = 128 + signal.SIGQUIT, "interrupted by SIGQUIT"
    BROKEN_PIPE = 128 + signal.SIGPIPE, "the reader of stdout went away"  # `commstack parse FILE | head`
    TERMINATED = 128 + signal.SIGTERM, "interrupted by SIGTERM"


globals().update(Status.__members__)  # each by its name too: exits.PASS


def signalled(signum: int | None) -> Status:
    """The status of a command a signal ended (None: Ctrl-C): 130, 143 for SIGTERM, 129 SIGHUP, 131 SIGQUIT."""
    return Status(128 + (signum or signal.SIGINT))


class CtrlC:
    """The signals that end a run or a screen while it holds Slurm, an allocation or a step: the first one is the
    KeyboardInterrupt Ctrl-C always is (`signum` says which it was, and `interrupted_by` of `run` names it); the
    later ones, from its making until restore(), are held off, so that no signal can cut the clean-up short."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

    def __init__(self, tell: Callable[[str], None], run: Interruptible):
        self.tell, self.run, self.signum, self.previous = tell, run, None, {}
        if threading.current_thread() is threading.main_thread():  # only there can Python catch signals
            self.previous = {sig: signal.signal(sig, self._handle) for sig in self.SIGNALS}

    def _handle(self, signum: int, frame: object) -> None:
        if self.signum is not None:
            self.tell("interrupted: still cleaning up, please wait")
            return
        self.signum, name = signum, signal.Signals(signum).name
        self.run.interrupted_by = "Ctrl-C" if signum == signal.SIGINT else name
        self.tell("interrupted: cleaning up, please wait (Ctrl-C again is ignored until done)"
                  if signum == signal.SIGINT else f"interrupted by {name}: cleaning up, "
                                                  "please wait (further signals are ignored until done)")
        raise KeyboardInterrupt

    def restore(self) -> None:
        """The signal handling of before; after a signal, the process is on its way out, and they are
        ignored to its end: Python's own finalization puts a handler of ours back to the default, which
        would kill it (exit -2 instead of 130)."""
        for sig, previous in self.previous.items():
            signal.signal(sig, signal.SIG_IGN if self.signum is not None else previous)
        self.previous = {}


class Interruptible(Protocol):
    interrupted_by: str  # what stopped it, in its records: "Ctrl-C" (the default), SIGTERM, ...
