"""Who uses a local cluster: one lease per user (<dir>/users/<pid>-<start time>, or `manual` for `commstack slurm
start`), and the lock (flock on <dir>/lock) that start and stop hold; LocalSlurm.stop ends the cluster for the last
user alone, and otherwise cancels the jobs of its own lease (Allocation tags them with --comment, job_tag).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from commstack.errors import SlurmUnavailableError
from commstack.files import private_dir, write_atomic
from commstack.slurm import procs

MANUAL = "manual"  # the lease of `commstack slurm start`, held until `commstack slurm stop`


class SlurmBusyError(SlurmUnavailableError):
    """Another process holds the local cluster's lock (starting or stopping it) for too long."""


def job_tag(lease: str) -> str:
    return f"commstack-lease-{lease}"


def own() -> str:
    """This process's lease: <pid>-<start time>."""
    return f"{os.getpid()}-{procs.start_time(os.getpid())}"


def alive(lease: str) -> bool:
    pid, _, start = lease.partition("-")
    return pid.isdigit() and procs.start_time(int(pid)) == start


class Leases:
    """The leases of the cluster in `root` (<root>/users), and its lock (<root>/lock)."""

    def __init__(self, root: Path):
        self.root, self.users = root, root / "users"

    @contextlib.contextmanager
    def locked(self, timeout: float = 300.0) -> Iterator[None]:
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise SlurmBusyError(f"the local Slurm in {self.root} has been locked by another commstack "
                                             f"for {timeout:.0f} s (starting or stopping it); try again") from None
                    time.sleep(0.2)
            yield
        finally:
            os.close(fd)

    def all(self) -> list[str]:
        return os.listdir(self.users) if self.users.is_dir() else []

    def live(self) -> list[str]:
        return sorted(n for n in self.all() if n == MANUAL or alive(n))

    def dead(self) -> list[str]:
        return [n for n in self.all() if n != MANUAL and not alive(n)]

    def take(self, name: str) -> None:
        private_dir(self.users)
        write_atomic(self.users / name, " ".join(sys.argv) + "\n", 0o600)

    def drop(self, name: str) -> None:
        (self.users / name).unlink(missing_ok=True)
