"""What the tiers that start clusters and processes share: waiting on an event, and ports of their own.

Tests wait on events, never on the clock: a CI runner may be loaded by a second test run. `wait_until`
polls a condition until it holds and fails at once when what would make it hold has ended (`alive`);
its only bound, HANG_S, catches a hang, not slowness (nothing a loaded machine does takes that long).
Ports are chosen free when a cluster starts, so that two test runs on one machine do not collide. The
namespace cluster is one per machine: a test module that uses it holds it alone (namespace_cluster_alone: a
machine-wide lock, polled, and a line saying who holds it while it waits)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Callable, TypeVar

import pytest

from commstack.files import walk_dir

T = TypeVar("T")
HANG_S = 600
#: one per machine, as the namespace cluster is, whoever's XDG_RUNTIME_DIR, HOME or COMMSTACK_SLURM_MN_DIR a run
#: has (the cluster needs root, so may its lock); not under the cluster's root, which tests pgrep for.
#: `flock /run/commstack/namespace-cluster.tests.lock CMD` runs CMD on that cluster between two test modules.
NAMESPACE_CLUSTER_LOCK = Path("/run/commstack/namespace-cluster.tests.lock")
#: a module on the namespace cluster runs many steps of up to HANG_S each: waiting longer for one is a hang
MODULE_HANG_S = 6 * HANG_S


def wait_until(condition: Callable[[], T], what: str, alive: Callable[[], object] = lambda: True,
               poll: float = 0.3, hang_s: float = HANG_S) -> T:
    """condition()'s first true value; fails naming `what` when alive() turns false first (or after hang_s)."""
    hang = time.monotonic() + hang_s
    while not (value := condition()):
        assert alive(), f"{what}: what it waited on ended first"
        assert time.monotonic() < hang, f"{what}: not after {hang_s} s (a hang)"
        time.sleep(poll)
    return value


def printed_in_time(attempt: Callable[[int], bool], timeout_s: int) -> int:
    """For a step that must run past its timeout after it printed: attempt(timeout_s) runs it once, asserts what
    its timeout did, and says whether its output came before the timeout fired. On a loaded machine srun or
    MPI_Init may take longer than that: then it runs again with a longer timeout, while all tries fit in HANG_S
    (output lost every time is a failure). Returns the timeout that served. Each is twice the last and 15 s:
    never whole minutes, so that srun's own limit (-t, the timeout in minutes rounded up) never comes with it."""
    spent = 0
    while not attempt(timeout_s):
        spent, timeout_s = spent + timeout_s, 2 * timeout_s + 15
        assert spent + timeout_s <= HANG_S, f"the step printed nothing before its timeout in {spent} s of tries"
    return timeout_s


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
def namespace_cluster_alone(pytestconfig: pytest.Config) -> Iterator[None]:
    """The namespace cluster (cs-node*, one per machine, shared by leases) for this test module alone, from its
    start to its stop: a second test run's module waits here for ours to end, saying so, and not only its jobs
    would collide: a module starts the cluster with its own node count (another count restarts it), degrades
    links with tc (the other's screen would see them) or kills a node."""
    if os.geteuid() != 0:
        pytest.skip("multinode: network namespaces need root")
    fd, told = _open_lock(), False

    def taken() -> bool:
        nonlocal told
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if not told:
                _tell(pytestconfig, f"waiting for the namespace cluster (held by pid "
                                    f"{', '.join(_holders(fd)) or 'unknown'}: {NAMESPACE_CLUSTER_LOCK})")
                told = True
            return False
    try:
        wait_until(taken, "the namespace cluster's lock", poll=1, hang_s=MODULE_HANG_S)
        yield
    finally:
        os.close(fd)


def _open_lock() -> int:
    """NAMESPACE_CLUSTER_LOCK, opened: its directory made 0700 where missing and refused unless root's own
    real, private directory; the file opened in it by name, never through a symlink."""
    directory, st = walk_dir(NAMESPACE_CLUSTER_LOCK.parent, make=0o700,
                             last_link="{} is a symlink: the namespace cluster's lock stays in a real directory")
    try:
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o077, \
            f"{NAMESPACE_CLUSTER_LOCK.parent}: mode {stat.S_IMODE(st.st_mode):04o}, uid {st.st_uid}: not root's 0700"
        return os.open(NAMESPACE_CLUSTER_LOCK.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                       dir_fd=directory)
    finally:
        os.close(directory)


def _holders(fd: int) -> list[str]:
    """The pids /proc/locks names as holding a lock on `fd`'s file (a waiter's line has `->`)."""
    st = os.fstat(fd)
    file = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with open("/proc/locks") as locks:
        return [f[4] for f in map(str.split, locks) if len(f) > 5 and f[1] != "->" and f[5] == file]


def _tell(pytestconfig: pytest.Config, line: str) -> None:
    """`line` on the terminal, past pytest's capture of the test's output."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(line, file=sys.stderr, flush=True)
