"""How a `commstack` command ends: every exit status, each with one name (docs/harness.md, the README), and the
signals that end a run (CtrlC).

An error that ends a command with its own status carries it as `exit_status`; any other named error is bad
input. `commstack parse` exits with its first failure's kind: PARSE below.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Protocol

PASS = 0  # every step ran and passed; no difference; no bad node or pair; nothing drifted
FAILED = 1  # some step did not pass; a difference, a bad node or pair, a drifted lock or image
USAGE = 2  # bad input (a damaged record, plan or history included)
NOT_RUN = 3  # every step that ran passed, but some did not run (--allow-not-run: PASS)
PENDING = 4  # `commstack status`: the batch job has not ended yet
UNWRITTEN = 5  # results (a report, a history, stdout) could not be written: a full or read-only file system
INTERRUPTED = 128 + signal.SIGINT  # Ctrl-C; another signal that ends a run: signalled()
BROKEN_PIPE = 128 + signal.SIGPIPE  # the reader of stdout went away (`commstack parse FILE | head`)

#: what each status of run, suite, status and report means, as their last line says it
MEANING = {PASS: "every step ran and passed", FAILED: "some step did not pass",
           NOT_RUN: "every step that ran passed, but some did not run (--allow-not-run accepts that)",
           USAGE: "bad input, named below", INTERRUPTED: "interrupted (Ctrl-C)",
           UNWRITTEN: "the results could not all be written"}

#: `commstack parse`: the status of each kind of ParseError (commstack.errors.PARSE_ERRORS), its own table
PARSE = {"parse-error": 3, "empty": 4, "unknown-format": 5, "bad-number": 6, "truncated": 7,
         "validation-failed": 8, "crashed": 9, "timed-out": 10, "node-failure": 11}


def meaning(status: int) -> str:
    """What `status` of run, suite, status or report means ("" where it has no fixed meaning)."""
    if status in MEANING:
        return MEANING[status]
    try:  # 128+N: ended by signal N (SIGTERM, SIGHUP), cleaned up as for Ctrl-C
        return f"interrupted by {signal.Signals(status - 128).name}" if status > 128 else ""
    except ValueError:
        return ""


def signalled(signum: int | None) -> int:
    """The status of a command a signal ended (None: Ctrl-C): 130, 143 for SIGTERM, 129 SIGHUP, 131 SIGQUIT."""
    return 128 + (signum or signal.SIGINT)


class CtrlC:
    """Ctrl-C (SIGINT), and every other signal that ends a run (SIGTERM: `timeout` and batch time limits;
    SIGHUP: a closed terminal; SIGQUIT), while a run or a screen holds Slurm, an allocation or a step: the
    first one is the KeyboardInterrupt Ctrl-C always is (`signum` says which it was, and `interrupted_by` of
    `run` names it); the later ones, until restore(), are held off, so that no signal can cut short the
    clean-up (the step stopped and its output kept, the allocation and the Slurm released, the records and
    report written)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

    def __init__(self, tell: Callable[[str], None], run: Interruptible | None = None):
        self.tell, self.run, self.signum, self.previous = tell, run, None, {}

    @property
    def pressed(self) -> bool:
        return self.signum is not None

    @property
    def status(self) -> int:
        return signalled(self.signum)

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():  # only there can Python catch signals
            self.previous = {sig: signal.signal(sig, self._handle) for sig in self.SIGNALS}

    def _handle(self, signum: int, frame: object) -> None:
        if self.pressed:
            self.tell("interrupted: still cleaning up, please wait")
            return
        self.signum = signum
        if self.run:
            self.run.interrupted_by = interruption(signum)
        self.tell("interrupted: cleaning up, please wait (Ctrl-C again is ignored until done)"
                  if signum == signal.SIGINT else f"interrupted by {signal.Signals(signum).name}: cleaning up, "
                                                  "please wait (further signals are ignored until done)")
        raise KeyboardInterrupt

    def restore(self) -> None:
        """The signal handling of before; after a signal, the process is on its way out, and they are
        ignored to its end: Python's own finalization puts a handler of ours back to the default, which
        would kill it (exit -2 instead of 130)."""
        for sig, previous in self.previous.items():
            signal.signal(sig, signal.SIG_IGN if self.pressed else previous)
        self.previous = {}


class Interruptible(Protocol):
    interrupted_by: str  # what stopped it, in its records: "Ctrl-C" (the default), SIGTERM, ...


def interruption(signum: int) -> str:
    """How records name what interrupted a run: Ctrl-C, SIGTERM, SIGHUP, SIGQUIT."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
