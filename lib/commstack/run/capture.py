"""A launched step's process and output: its streams copied to files as they come, up to a limit per stream,
until it ends, times out or is stopped (docs/harness.md#what-a-step-may-print-and-leave-behind).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

from commstack.errors import LaunchError, OutputTooLargeError
from commstack.files import FileWriteError

#: how long the output may stay open once the launcher ended (a descendant holds it), in s
HELD_OPEN_S = 5.0


def output_limit() -> int:
    """Bytes kept of each of a step's streams (stdout, stderr): COMMSTACK_OUTPUT_LIMIT_MIB, 64 by default."""
    raw = os.environ.get("COMMSTACK_OUTPUT_LIMIT_MIB") or "64"
    if not raw.isdigit() or int(raw) < 1:
        raise LaunchError(f"COMMSTACK_OUTPUT_LIMIT_MIB={raw!r}: a whole number of MiB, 1 or more")
    return int(raw) * 2**20


def output_too_large(name: str, sizes: dict[str, int], limit: int, outdir: Path) -> OutputTooLargeError:
    """The error of a step whose streams (file name -> bytes seen) went past `limit`."""
    big = ", ".join(f"{file} {size / 2**20:.0f} MiB" for file, size in sizes.items())
    return OutputTooLargeError(f"{name}: output past the limit of {limit // 2**20} MiB per stream ({big} and more; "
                               "COMMSTACK_OUTPUT_LIMIT_MIB): the step was stopped", str(outdir))


def stop(proc: subprocess.Popen) -> None:
    """srun cancels its step on the second SIGINT within a second; then SIGKILL the group."""
    for sig in (signal.SIGINT, signal.SIGINT):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        time.sleep(0.3)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


class Sink:
    """One stream of a step, written to its file as it comes, byte for byte, up to `limit` bytes; what
    comes after is read and dropped (the step is being stopped)."""

    def __init__(self, path: Path, limit: int):
        self.path, self.limit, self.size, self.over = path, limit, 0, False
        try:  # never through a symlink
            self.file = os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                                          0o644), "wb")
        except OSError as e:
            raise FileWriteError.of(path, e) from e

    def write(self, chunk: bytes) -> None:
        keep = chunk[:max(0, self.limit - self.size)]
        self.over = self.over or len(keep) < len(chunk)
        self.size += len(keep)
        try:
            self.file.write(keep)
        except OSError as e:
            raise FileWriteError.of(self.path, e) from e

    def close(self) -> None:
        if not self.file.closed:
            try:
                self.file.flush()
                os.fsync(self.file.fileno())
                self.file.close()
            except OSError as e:
                raise FileWriteError.of(self.path, e) from e

    def text(self) -> str:
        with open(self.path, "rb") as f:
            return f.read(self.limit).decode(errors="replace")


def pump(proc: subprocess.Popen, sinks: dict[int, Sink], deadline: float, watch: bool = True,
         tidy: Callable[[], None] | None = None) -> str:
    """Copy the step's streams to their files until both end: `exited`; or until `timeout` at the
    deadline, or (watch=True) `too large`, a stream past its limit. A descendant that keeps them open
    after the launcher ended is not waited for past HELD_OPEN_S: `exited` all the same (the sweep ends it).
    `tidy` is called every second while the launcher runs."""
    open_fds, exited_at, asked = {fd for fd, sink in sinks.items() if not sink.file.closed}, None, time.monotonic()
    while open_fds:
        for fd in select.select(list(open_fds), [], [], 0.2)[0]:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                sinks[fd].write(chunk)
            else:
                open_fds.discard(fd)
        now = time.monotonic()
        if proc.poll() is not None:
            exited_at = exited_at or now
            if now - exited_at > HELD_OPEN_S:
                break
        elif watch and any(s.over for s in sinks.values()):
            return "too large"
        elif tidy and now - asked > 1:
            asked = now
            tidy()
        elif now > deadline:
            return "timeout"
    if watch:
        proc.wait()
    return "exited"
