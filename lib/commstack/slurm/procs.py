"""Processes on this host, known through /proc: which are ours, and how they are ended (the TaskEpilog, the
reaper every task runs under, a step's leftovers swept), each through a pidfd after its start time was checked,
so that a pid reused in between is never hit (docs/harness.md#what-a-step-may-print-and-leave-behind).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path


def _proc(pid: int, name: str) -> str | None:
    """/proc/<pid>/<name>; None once the process is gone."""
    try:
        return Path(f"/proc/{pid}/{name}").read_text()
    except OSError:
        return None


def _stat(pid: int, field: int) -> str | None:
    """A field of /proc/<pid>/stat after the command name (which may hold spaces and parentheses)."""
    stat = _proc(pid, "stat")
    return stat.rsplit(")", 1)[1].split()[field] if stat else None


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot: with the pid, names one process for good."""
    return _stat(pid, 19)


def ppid(pid: int) -> int | None:
    parent = _stat(pid, 1)
    return int(parent) if parent else None


def pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def exe(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        return None


def euid(pid: int) -> int | None:
    status = (_proc(pid, "status") or "").splitlines()
    return next((int(line.split()[2]) for line in status if line.startswith("Uid:")), None)


def refers_to(pid: int, root: Path) -> bool:
    """The process names `root` on its command line, works in it or holds a file of it open
    (slurmstepd rewrites its command line; its working directory and log stay ours)."""
    inside = str(root) + os.sep
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        if inside in cmdline.replace("\0", " ") or (os.readlink(f"/proc/{pid}/cwd") + os.sep).startswith(inside):
            return True
        fds = f"/proc/{pid}/fd"
        return any(os.readlink(f"{fds}/{fd}").startswith(inside) for fd in os.listdir(fds))
    except OSError:
        return False


def listening(port: int) -> dict[str, int]:
    """The sockets in LISTEN on TCP `port` in this network namespace (/proc/net/tcp and tcp6): inode -> uid."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                found[f[9]] = int(f[7])
    return found


def descendants(parents: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid in pids():
        parent = ppid(pid)
        if parent is not None:
            children.setdefault(parent, []).append(pid)
    out, todo = [], list(parents)
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def end(pid: int, start: str | None, sig: int, grace_s: float) -> None:
    """Signal a process we checked is ours (pid and start time, as it was checked); after grace_s, SIGKILL
    it if it still runs. Through a pidfd: a pid reused in between, by the time of either signal, is never
    signalled."""
    fd = signalled(pid, start, sig) if start is not None else None
    if fd is None:
        return
    try:
        if grace_s and not select.select([fd], [], [], grace_s)[0]:  # readable once the process ended
            with contextlib.suppress(ProcessLookupError):  # it ended since
                signal.pidfd_send_signal(fd, signal.SIGKILL)
    finally:
        os.close(fd)


def kill_all(find: Callable[[], Iterable[int]]) -> None:
    """SIGKILL every process `find` names, each checked as found, until it names none (50 rounds at most:
    one that forks on is not chased for ever)."""
    for _ in range(50):
        left = {pid: start_time(pid) for pid in find()}
        if not left:
            return
        for pid, start in left.items():
            end(pid, start, signal.SIGKILL, 0)
        time.sleep(0.05)


#: what names a task's processes in their environment: its cluster, job, step and rank
TASK_MARKS = ("SLURM_CONF", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID")


def leftovers(marks: dict[str, str]) -> list[int]:
    """Processes of ours (our uid), but this one and its parents, whose environment holds every one of
    `marks` (name -> value), as they were started."""
    want = {f"{k}={v}".encode() for k, v in marks.items()}
    mine, pid = set(), os.getpid()
    while pid > 1 and pid not in mine:
        mine.add(pid)
        pid = ppid(pid) or 1
    found = []
    for pid in pids():
        if pid in mine or euid(pid) != os.geteuid():
            continue
        try:
            environ = set(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if want <= environ:
            found.append(pid)
    return found


def orphans(marks: dict[str, str], launcher: int) -> list[int]:
    """The processes with `marks` that left the tree of `launcher` (a daemon), once none of its
    descendants has them any more (its ranks ended); [] while they run."""
    marked = set(leftovers(marks)) - {launcher}
    inside = set(descendants([launcher]))
    return [] if marked & inside else sorted(marked)


def sweep(marks: dict[str, str], only: list[int] | None = None) -> None:
    """SIGKILL every leftover process with `marks`, or (`only`) those of them."""
    if marks:  # none would match every process of ours
        kill_all(lambda: [pid for pid in leftovers(marks) if only is None or pid in only])


#: prctl(2): orphans of this process's descendants become its children, not init's
PR_SET_CHILD_SUBREAPER = 36
#: how a benchmark runs under reap() (Launcher.command): this Python, isolated from the benchmark's variables
REAPER = [sys.executable, "-I", "-m", "commstack.slurm", "reap", "--"]
#: the signals reap() passes on to its program
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
#: how long what a program left has to end after SIGTERM before SIGKILL
GRACE_S = 2.0
#: how long a process may take to end after SIGKILL before it counts as unkillable (uninterruptible sleep)
STUCK_S = 30.0


def reap(argv: list[str]) -> int:
    """Run `argv` as the child of a child subreaper (this process), and when it ends, end every process it left
    (a daemon's parent is this process, the one mark a benchmark cannot drop); signals are passed on to it, and its
    exit status (or signal) is ours (docs/harness.md#what-a-step-may-print-and-leave-behind)."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"commstack reap: prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
    child: subprocess.Popen | None = None
    early: list[int] = []  # signals that came before `child` was set

    def forward(signum: int, _frame: object) -> None:
        if child is None:
            early.append(signum)
        elif child.returncode is None:  # not reaped: the pid is still the child's
            child.send_signal(signum)
    for sig in FORWARDED:
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)  # blocked by whoever started us: they come now
    if early:
        return _die(early[0])
    try:
        child = subprocess.Popen(argv)
    except OSError as e:
        sys.exit(f"commstack reap: {argv[0]}: {e.strerror}")
    for signum in early:  # came while it was starting
        child.send_signal(signum)
    status = child.wait()
    stuck = end_left()
    if stuck:
        print(f"commstack reap: {len(stuck)} process(es) {argv[0]} left did not end {STUCK_S:.0f} s after SIGKILL"
              f" and are left running: {', '.join(f'{pid} ({_comm(pid)})' for pid in stuck)}", file=sys.stderr)
    return _die(-status) if status < 0 else status


def _die(signum: int) -> int:
    """The program was killed by `signum`, or we were before it started: so are we, for srun and mpirun to tell."""
    with contextlib.suppress(OSError):  # SIGKILL's action cannot be set, nor need be
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return 128 + signum  # the shell's way, should the signal be blocked


def end_left() -> list[int]:
    """End and reap every descendant of this process (what its program left is adopted here), each checked as
    found: SIGTERM, SIGKILL GRACE_S later, until none is left; those SIGKILL did not end in STUCK_S are returned."""
    termed: set[tuple[int, str]] = set()
    killed: set[tuple[int, str]] = set()
    while True:
        _reap_ended()
        left = {(pid, start) for pid in descendants([os.getpid()]) if (start := start_time(pid)) is not None}
        if left <= killed:
            return sorted(pid for pid, _ in left)
        fds, wait = [], STUCK_S
        for pid, start in left - killed:
            sig = signal.SIGKILL if (pid, start) in termed else signal.SIGTERM
            (killed if sig == signal.SIGKILL else termed).add((pid, start))
            wait = min(wait, GRACE_S if sig == signal.SIGTERM else STUCK_S)
            if (fd := signalled(pid, start, sig)) is not None:
                fds.append(fd)
        try:
            _wait_ended(fds, wait)
        finally:
            for fd in fds:
                os.close(fd)


def signalled(pid: int, start: str, sig: int) -> int | None:
    """A pidfd of the process `pid` started at `start`, sent `sig`; None if it has ended (or the pid is another's)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    with contextlib.suppress(ProcessLookupError):  # it ended since
        if start_time(pid) == start:
            signal.pidfd_send_signal(fd, sig)
            return fd
    os.close(fd)
    return None


def _wait_ended(fds: list[int], timeout_s: float) -> None:
    """Until every pidfd in `fds` is readable (its process ended) or timeout_s passed."""
    deadline = time.monotonic() + timeout_s
    todo = list(fds)
    while todo and (remaining := deadline - time.monotonic()) > 0:
        ready = select.select(todo, [], [], remaining)[0]
        todo = [fd for fd in todo if fd not in ready]


def _reap_ended() -> None:
    """Reap every child of ours that has ended (zombies: the program's leftovers adopted here)."""
    with contextlib.suppress(ChildProcessError):  # no child left
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _comm(pid: int) -> str:
    return (_proc(pid, "comm") or "?").strip()


def task_epilog() -> None:
    """slurmstepd's TaskEpilog, in the ended task's environment: what the task left behind ends too."""
    marks = {k: os.environ[k] for k in TASK_MARKS if os.environ.get(k)}
    if len(marks) == len(TASK_MARKS):
        sweep(marks)


def program_path(program: str) -> str | None:
    found = shutil.which(program, path=sbin_path())
    return os.path.realpath(found) if found else None


def sbin_path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
