"""What the tiers that start clusters and processes share: waiting on an event, and ports of their own.

Tests wait on events, never on the clock: a CI runner may be loaded by a second test run. `wait_until`
polls a condition until it holds and fails at once when what would make it hold has ended (`alive`);
its only bound, HANG_S, catches a hang, not slowness (nothing a loaded machine does takes that long).
Ports are chosen free when a cluster starts, so that two test runs on one machine do not collide. The
namespace cluster is one per machine: a test module that uses it holds it alone (namespace_cluster_alone)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Callable, TypeVar

from commstack.slurm import config

T = TypeVar("T")
HANG_S = 600
#: beside the namespace cluster's state directory; `flock ~/.local/state/commstack/namespace-cluster.tests.lock CMD`
#: runs CMD on that cluster between two test modules
NAMESPACE_CLUSTER_LOCK = "namespace-cluster.tests.lock"


def wait_until(condition: Callable[[], T], what: str, alive: Callable[[], object] = lambda: True,
               poll: float = 0.3) -> T:
    """condition()'s first true value; fails naming `what` when alive() turns false first (or after HANG_S)."""
    hang = time.monotonic() + HANG_S
    while not (value := condition()):
        assert alive(), f"{what}: what it waited on ended first"
        assert time.monotonic() < hang, f"{what}: not after {HANG_S} s (a hang)"
        time.sleep(poll)
    return value


def queue_empties(cluster) -> None:
    """Until the queue of a cluster that is up is empty. Only a COMPLETING job (cancelled or ended, its
    processes still ending) is waited for; any other (PENDING, RUNNING) was left behind by the test: it fails
    at once, its squeue line quoted, never waited out until it ends on its own."""
    def empty() -> bool:
        jobs = cluster.jobs()
        left = ["|".join(job) for job in jobs if job[1] != "COMPLETING"]
        assert not left, f"jobs left in the queue (squeue -o '%i|%T|%k'): {left}"
        return not jobs
    wait_until(empty, "the COMPLETING jobs end", poll=0.5)


def free_port_pair() -> int:
    """A port nobody listens on whose next one is free too (COMMSTACK_SLURM_PORT's slurmctld, slurmd)."""
    while True:
        with socket.socket() as first, socket.socket() as second:
            first.bind(("", 0))
            port = first.getsockname()[1]
            if port < 65534:
                try:
                    second.bind(("", port + 1))
                except OSError:
                    continue
                return port


def ranks_busy(marker: str, cpu_s: float = 2.0) -> bool:
    """Every process whose command line starts with `marker` (a benchmark binary's path) has run `cpu_s`
    seconds of CPU: past MPI_Init and into its loop. Its stdout is no sign: srun forwards a step's output
    when the step ends."""
    ticks, seen = os.sysconf("SC_CLK_TCK"), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(marker.encode()):
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        seen.append((int(fields[11]) + int(fields[12])) / ticks)  # utime + stime
    return bool(seen) and min(seen) >= cpu_s


@contextlib.contextmanager
def namespace_cluster_alone() -> Iterator[None]:
    """The namespace cluster (cs-node*, one per machine, shared by leases) for this test module alone, from its
    start to its stop: a second test run's module waits here for ours to end, and not only its jobs would
    collide: a module starts the cluster with its own node count (another count restarts it), degrades links
    with tc (the other's screen would see them) or kills a node."""
    state = config.multinode_dir().parent  # not a name the cluster's root is a prefix of: tests pgrep that root
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(state / NAMESPACE_CLUSTER_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the event: the other module's lock released, whenever that is
        yield
    finally:
        os.close(fd)
