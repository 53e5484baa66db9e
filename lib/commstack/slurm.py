"""A real Slurm cluster (Debian's slurm-wlm, munge, PMIx plugin) run from a private directory of ours.

Nothing outside that directory is touched: munge gets its own key and socket, slurmctld and
slurmd their own state, spool, logs and ports. Clients reach it through SLURM_CONF.

The directory is $XDG_RUNTIME_DIR/commstack/slurm, else ~/.local/state/commstack/slurm
(COMMSTACK_SLURM_DIR overrides it): created 0700, refused when it is a symlink, someone else's or open
to others. Its ports are chosen free when it starts and recorded in its slurm.conf there (no fixed
port another local user could take first; COMMSTACK_SLURM_PORT fixes them, slurmd's the next one).
The daemons run as root (SlurmUser=root): another user gets EmbeddedSlurmNeedsRootError at once.

Every file in it is written atomically, the munge key 0400 from the start, and a process named by a pid
file is trusted or signalled only when its executable is the daemon we expect, it runs as us and it
refers to this directory.

A step's processes end with it: the TaskEpilog (`python -m commstack.slurm task-epilog`, run by
slurmstepd as each task ends, before the step's output is closed) kills what the task left behind,
found by the task's SLURM_CONF, job, step and rank in their environment, so that a benchmark's daemon
neither outlives it nor keeps its output open. proctrack/cgroup would do it by the kernel's count,
but its cgroup v1 path (freezer/slurm/uid_U/job_J/step_S) has no per-cluster part: two clusters on
one host (the shared one and a test's, or the nodes of the multi-node one) would share their job 1's.

Several runs may use one cluster at once. start() and stop() hold a lock (flock on <dir>/lock);
each user holds a lease (<dir>/users/<pid>-<start time>, or `manual` for `commstack slurm start`);
stop() shuts the cluster down only for the last user, and otherwise cancels only the jobs of its
own lease (Allocation tags them with --comment). A lease whose process died is dropped and its jobs
cancelled. A node left drained or down is resumed, or reported with NodeDrainedError.

With nodes=N>1 (LocalSlurm.multinode(N), root only) every node is a network namespace cs-node<i>
(and its own UTS namespace, hostname node<i>) with one veth, eth0 = 10.77.0.(10+i)/24, on the
bridge csbr0 (10.77.0.1 on the host side). slurmctld and munged run on the host; each node runs its
own slurmd inside its namespace. One such cluster per machine: the names and the subnet are fixed.
A host whose firewall drops bridged forwarding (br_netfilter with FORWARD policy DROP) breaks
node-to-node traffic.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from commstack.errors import ControllerLostError, EmbeddedSlurmNeedsRootError, SlurmUnavailableError
from commstack.files import UnsafePathError, private_dir, safe_parents, write_atomic

DAEMONS = ("slurmctld", "slurmd", "munged")
PROGRAMS = DAEMONS + ("slurmstepd",)  # what a cluster of ours runs; stop() leaves none of them
BRIDGE, SUBNET, NETNS_PREFIX, VETH_PREFIX = "csbr0", "10.77.0", "cs-node", "csv-node"
LOCAL_SYSTEMS = frozenset({"local", "local-multinode"})  # systems that run on the embedded Slurm
CONF_MARK = "# written by commstack localslurm"
CLIENT_TIMEOUT = 30.0  # s for scontrol, squeue, sinfo, scancel: a dead controller must not hang us
MANUAL = "manual"  # the lease of `commstack slurm start`, held until `commstack slurm stop`
READY = {"idle", "mixed", "allocated", "completing"}
RESUMABLE = {"drained", "draining", "drain", "down", "fail", "failing"}


class NamespaceError(SlurmUnavailableError):
    """The namespaces, veths or bridge of the multi-node cluster could not be made (not root, no iproute2)."""


class NodeDrainedError(SlurmUnavailableError):
    """A node of the local cluster is drained or down and `scontrol update state=resume` did not bring it back."""


class SlurmBusyError(SlurmUnavailableError):
    """Another process holds the local cluster's lock (starting or stopping it) for too long."""


def state_home() -> Path:
    """Where commstack keeps per-user state: $XDG_RUNTIME_DIR/commstack, else ~/.local/state/commstack."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "commstack" if runtime else Path.home() / ".local" / "state" / "commstack"


def default_dir() -> Path:
    return Path(os.environ.get("COMMSTACK_SLURM_DIR") or state_home() / "slurm")


def given_port() -> int | None:
    """slurmctld's port when COMMSTACK_SLURM_PORT fixes it (slurmd's is the next one); else None: chosen."""
    raw = os.environ.get("COMMSTACK_SLURM_PORT")
    if raw and not (raw.isdigit() and 1024 <= int(raw) < 65535):
        raise SlurmUnavailableError(f"COMMSTACK_SLURM_PORT={raw!r}: a port number from 1024 to 65534")
    return int(raw) if raw else None


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports nobody listens on now, as the kernel hands out for port 0."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def multinode_dir() -> Path:
    return Path(os.environ.get("COMMSTACK_SLURM_MN_DIR") or state_home() / "slurm-mn")


def _private_tree(path: Path) -> Path:
    """`path` as a private directory under parents nobody else can change; a missing commstack state
    home above it is made private too."""
    home = state_home()
    if path.parent == home:
        home.parent.mkdir(parents=True, exist_ok=True)
        private_dir(home)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    safe_parents(path)
    return private_dir(path)


@dataclass
class LocalSlurm:
    root: Path = field(default_factory=default_dir)
    #: slurmctld's and slurmd's ports; None: COMMSTACK_SLURM_PORT's, else chosen free when it starts
    ctld_port: int | None = None
    slurmd_port: int | None = None
    nodes: int = 1

    def __post_init__(self) -> None:
        self.root = Path(self.root).absolute()
        port = given_port()
        if self.ctld_port is None and port:
            self.ctld_port, self.slurmd_port = port, port + 1
        self._choose_ports = self.ctld_port is None

    def ports(self) -> tuple[int, int] | None:
        """The ports its slurm.conf records (slurmctld, slurmd), when it has one."""
        try:
            text = self.conf.read_text()
        except OSError:
            return None
        found = dict(re.findall(r"^(SlurmctldPort|SlurmdPort)=(\d+)$", text, re.M))
        return (int(found["SlurmctldPort"]), int(found["SlurmdPort"])) if len(found) == 2 else None

    @classmethod
    def multinode(cls, nodes: int | None = None) -> "LocalSlurm":
        """Its own directory and ports, so it runs beside the single-node cluster.
        nodes=None: as many as the existing slurm.conf names (stop, status), else 2."""
        root = multinode_dir()
        if nodes is None:
            conf = root / "etc" / "slurm.conf"
            nodes = len(re.findall(r"^NodeName=", conf.read_text(), re.M)) if conf.is_file() else 2
        if nodes < 2:
            raise ValueError("a multi-node cluster has 2 nodes or more")
        return cls(root, nodes=nodes)

    @classmethod
    def for_system(cls, system: str, nodes: int) -> "LocalSlurm":
        """The embedded cluster a local system runs on."""
        return cls.multinode(nodes) if system == "local-multinode" else cls()

    def check_state(self) -> Path:
        """Its state directory, made private when missing; UnsafePathError when someone else prepared it."""
        return _private_tree(self.root)

    @property
    def node_names(self) -> list[str]:
        if self.nodes == 1:
            return [socket.gethostname().split(".")[0]]
        return [f"node{i}" for i in range(1, self.nodes + 1)]

    def netns(self, node: str) -> str:
        return NETNS_PREFIX + node.removeprefix("node")

    def veth(self, node: str) -> str:
        """The host-side end of a node's veth: its RX counts what the node sent, its TX what it received."""
        return VETH_PREFIX + node.removeprefix("node")

    def address(self, node: str) -> str:
        return f"{SUBNET}.{10 + int(node.removeprefix('node'))}"

    def _daemons(self) -> tuple[str, ...]:
        if self.nodes == 1:
            return DAEMONS
        return ("slurmctld", *(f"slurmd-{n}" for n in self.node_names), "munged")

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def variables(self) -> dict[str, str]:
        """Environment for Slurm clients (srun, salloc, scancel, sinfo) of this cluster: none of the
        site's SLURM_* (a SLURM_JOB_ID of a site allocation names no job here); the lease variable makes
        Allocation tag its jobs as this process's."""
        own = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**own, "SLURM_CONF": str(self.conf), "COMMSTACK_SLURM_LEASE": _job_tag(_own_lease())}

    # --- processes: only ours are trusted or signalled -------------------------------------------

    def _pidfile(self, daemon: str) -> Path:
        return self.root / "run" / f"{daemon}.pid"

    def pid(self, daemon: str) -> int | None:
        """The pid in a daemon's pid file, when that process is the daemon of this cluster."""
        try:
            fd = os.open(self._pidfile(daemon), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd) as f:
                pid = int(f.read(32).strip())
        except (OSError, ValueError):
            return None
        return pid if self._ours(pid, daemon.split("-")[0]) else None

    def _ours(self, pid: int, program: str | None = None) -> bool:
        """pid runs one of our programs (`program`, else any in PROGRAMS), as us, about this directory."""
        exe = _exe(pid)
        want = [program] if program else PROGRAMS
        return exe is not None and exe in {_program_path(p) for p in want} and _euid(pid) == os.geteuid() \
            and _refers_to(pid, self.root)

    def processes(self) -> list[int]:
        """Every process of this cluster: its daemons, their slurmstepd and the tasks those run."""
        procs = [pid for pid in _pids() if self._ours(pid)]
        stepds = [pid for pid in procs if _exe(pid) == _program_path("slurmstepd")]
        return procs + [pid for pid in _descendants(stepds) if pid not in procs]

    def running(self) -> bool:
        return all(self.pid(d) for d in self._daemons())

    # --- lock and leases ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, timeout: float = 300.0) -> Iterator[None]:
        self.check_state()
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

    @property
    def _users(self) -> Path:
        return self.root / "users"

    def leases(self) -> list[str]:
        """The live leases: `manual` and <pid>-<start time> of processes still running."""
        if not self._users.is_dir():
            return []
        return sorted(n for n in os.listdir(self._users) if n == MANUAL or _alive(n))

    def _prune(self) -> None:
        """Drop the leases of processes that died, and cancel the jobs they left."""
        if not self._users.is_dir():
            return
        dead = [n for n in os.listdir(self._users) if n != MANUAL and not _alive(n)]
        if dead and self.pid("slurmctld"):
            self._cancel({_job_tag(n) for n in dead})
        for n in dead:
            (self._users / n).unlink(missing_ok=True)

    def _take(self, manual: bool) -> None:
        private_dir(self._users)
        name = MANUAL if manual else _own_lease()
        write_atomic(self._users / name, " ".join(sys.argv) + "\n", 0o600)

    # --- start and stop -----------------------------------------------------------------------------

    @staticmethod
    def check_root() -> None:
        """EmbeddedSlurmNeedsRootError unless this process runs as root (its daemons run as root)."""
        if os.geteuid() != 0:
            raise EmbeddedSlurmNeedsRootError(
                "the embedded Slurm needs root: run as root or with sudo, or use --slurm external")

    def start(self, timeout: float = 30.0, manual: bool = False) -> None:
        """Start the cluster unless it runs, and take a lease on it: this process's, or with
        manual=True the one `commstack slurm stop` gives back."""
        self.check_root()
        missing = [d for d in PROGRAMS + ("srun", "sinfo") if not shutil.which(d, path=_sbin_path())]
        if missing:
            raise SlurmUnavailableError(
                f"cannot start the local Slurm: {', '.join(missing)} not found "
                "(install slurm-wlm, slurm-client and munge: ci/install-deps.sh)"
            )
        if self.nodes > 1 and not shutil.which("ip", path=_sbin_path()):
            raise NamespaceError("cannot start the multi-node local Slurm: ip not found (install iproute2)")
        with self._locked():
            self._prune()
            launched = not self.running()
            if launched:
                self._teardown()  # half-started leftovers, or a cluster whose controller died
                self._launch()
            try:
                self._ready(timeout)
            except SlurmUnavailableError:
                if launched:  # a cluster others use is left as it is
                    self._teardown()
                raise
            self._take(manual)

    def stop(self, manual: bool = False, force: bool = False) -> bool:
        """Give back this process's lease (manual=True: the `commstack slurm start` one). The last
        user (or force=True) shuts the cluster down: every job, daemon, slurmstepd and task of it
        ends, and a multi-node cluster loses its namespaces, veths and bridge. While others still
        use it, only this lease's jobs are cancelled. Returns whether the cluster was shut down."""
        with self._locked():
            mine = MANUAL if manual else _own_lease()
            if self.pid("slurmctld"):
                self._cancel({_job_tag(mine)})
            (self._users / mine).unlink(missing_ok=True)
            self._prune()
            if self.leases() and not force:
                return False
            for n in os.listdir(self._users) if self._users.is_dir() else []:
                (self._users / n).unlink()
            self._teardown()
            return True

    def _launch(self) -> None:
        if self._choose_ports:  # for this life of the cluster; its slurm.conf records them
            self.ctld_port, self.slurmd_port = free_ports(2)
        self._write_config()
        if self.nodes > 1:
            self._net_up()
        r = self.root
        self._spawn(
            ["munged", "--force", f"--socket={r}/munge/munge.sock", f"--key-file={r}/munge/munge.key",
             f"--pid-file={self._pidfile('munged')}", f"--log-file={r}/log/munged.log",
             f"--seed-file={r}/munge/munge.seed"], "munged")
        # -c: no job of an earlier life is recovered; its processes were ended by _teardown
        self._spawn(["slurmctld", "-c", "-f", str(self.conf)], "slurmctld")
        if self.nodes == 1:
            self._spawn(["slurmd", "-f", str(self.conf)], "slurmd")
        else:
            slurmd = shutil.which("slurmd", path=_sbin_path())
            for n in self.node_names:
                # nsenter, not `ip netns exec`: that one remounts /sys, and slurmd dies without /sys/fs/cgroup.
                # Its own UTS namespace too: tasks see hostname node<i> (srun hostname, Open MPI session dirs).
                self._spawn(["nsenter", f"--net=/run/netns/{self.netns(n)}", "unshare", "--uts", "sh", "-c",
                             'hostname "$1" && exec "$2" -f "$3" -N "$1"', "sh", n, slurmd, str(self.conf)],
                            f"slurmd-{n}")

    def _ready(self, timeout: float) -> None:
        """Wait until every node takes jobs; a drained or down node is resumed once, then reported."""
        deadline = time.monotonic() + timeout
        resumed: set[str] = set()
        while True:
            nodes = self.node_states()
            if nodes and all(state in READY for state, _ in nodes.values()):
                return
            stuck = {n: sr for n, sr in nodes.items() if sr[0].rstrip("*") in RESUMABLE}
            for n in set(stuck) - resumed:
                self._client("scontrol", "update", f"nodename={n}", "state=resume", check=False)
                resumed.add(n)
            if time.monotonic() > deadline:
                if stuck:
                    raise NodeDrainedError(
                        "; ".join(f"node {n} is {s} ({why or 'no reason given'})" for n, (s, why) in stuck.items())
                        + f" and stays so after `scontrol update nodename=... state=resume`; see {self.root / 'log'}")
                logs = "\n".join(self._tail(f"{d}.log") for d in self._daemons() if d != "munged")
                raise SlurmUnavailableError(f"local Slurm did not come up within {timeout:.0f} s; last log lines:\n"
                                            f"{logs}")
            time.sleep(0.5)

    def node_states(self) -> dict[str, tuple[str, str]]:
        """node -> (state, reason) as sinfo says, flags dropped but `*` (not responding); {} while the
        controller does not answer."""
        out = self._client("sinfo", "-h", "-N", "-o", "%N|%T|%E", check=False)
        if out.returncode != 0:
            return {}
        states = {}
        for line in out.stdout.splitlines():
            name, state, reason = line.split("|", 2)
            base = state.rstrip("*~#!%$@^-+")
            # a trailing * is "not responding": such a node is not ready, whatever its state
            states[name] = (base + "*" if state.endswith("*") else base, "" if reason == "none" else reason)
        return states

    def _client(self, *argv: str, check: bool = True, timeout: float = CLIENT_TIMEOUT) -> subprocess.CompletedProcess:
        proc = client(list(argv), self.variables, timeout)
        if check and proc.returncode != 0:
            raise SlurmUnavailableError(f"`{' '.join(argv)}` failed (exit {proc.returncode}): {proc.stderr.strip()}")
        return proc

    def jobs(self, timeout: float = CLIENT_TIMEOUT) -> list[tuple[str, str, str]]:
        """(job id, state, comment) of every job in the queue."""
        listing = self._client("squeue", "-h", "-o", "%i|%T|%k", timeout=timeout).stdout
        return [tuple(line.split("|", 2)) for line in listing.splitlines()]  # type: ignore[misc]

    def _cancel(self, tags: set[str] | None) -> None:
        """Cancel the jobs whose comment is one of `tags` (None: every job), by job id."""
        try:
            ids = [i for i, _, k in self.jobs(timeout=10) if tags is None or k in tags]
            if ids:
                self._client("scancel", "--quiet", *ids, check=False, timeout=10)
        except SlurmUnavailableError:
            pass  # nothing to cancel through a dead controller; _teardown ends the processes

    def _write_config(self) -> None:
        r = self.root
        subdirs = ["etc", "run", "log", "state", "spool", "munge", "tmp"]
        if self.nodes > 1:
            subdirs += [*(f"spool/{n}" for n in self.node_names), *(f"tmp/{n}" for n in self.node_names)]
        for sub in subdirs:
            private_dir(r / sub)
        host = socket.gethostname().split(".")[0]
        cpus = os.cpu_count() or 1
        mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        if self.nodes == 1:
            # TmpFS of our own: the PMIx plugin makes <TmpFS>/spmix_appdir_<uid>_<job>.<step>, and a
            # slurmstepd that was killed leaves it, which fails the next cluster's step of that number
            ctld_addr, pidfile, spool, slurmd_log, extra = \
                "127.0.0.1", self._pidfile("slurmd"), f"{r}/spool", f"{r}/log/slurmd.log", f"TmpFS={r}/tmp\n"
            node_lines = f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN"
            part_nodes = host
        else:
            # %n: each slurmd its own pid file, spool, log and TmpFS (the PMIx plugin's directory is
            # per step and node, and all nodes share one file system).
            # SlurmdTimeout short so that a dead node is declared DOWN (NODE_FAIL) within ~20 s.
            ctld_addr, pidfile, spool, slurmd_log = \
                f"{SUBNET}.1", self._pidfile("slurmd-%n"), f"{r}/spool/%n", f"{r}/log/slurmd-%n.log"
            extra = f"TmpFS={r}/tmp/%n\nSlurmdTimeout=15\n"
            node_lines = "\n".join(f"NodeName={n} NodeAddr={self.address(n)} CPUs={cpus} "
                                   f"RealMemory={mem_mb // self.nodes} State=UNKNOWN" for n in self.node_names)
            part_nodes = ",".join(self.node_names)
        for own in (self.conf, r / "etc" / "task-epilog"):  # the private directory's: replaced whatever they are
            if own.is_symlink():
                own.unlink()
        write_atomic(self.conf, f"""{CONF_MARK}; state lives in {r}
ClusterName=commstack-local
SlurmctldHost={host}({ctld_addr})
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge/munge.sock
StateSaveLocation={r}/state
SlurmdSpoolDir={spool}
SlurmctldPidFile={self._pidfile('slurmctld')}
SlurmdPidFile={pidfile}
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={slurmd_log}
# no cgroups in a container or CI sandbox
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
# what a task leaves running ends with it (proctrack/linuxproc only follows parents)
TaskEpilog={self._task_epilog()}
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=5
InactiveLimit=0
MinJobAge=30
{extra}{node_lines}
PartitionName=local Nodes={part_nodes} Default=YES MaxTime=INFINITE OverSubscribe=YES State=UP
""")
        key = r / "munge" / "munge.key"
        try:
            st = os.lstat(key)
        except FileNotFoundError:
            write_atomic(key, os.urandom(1024), 0o400)  # private before its first byte
        else:
            if not (key.is_file() and not key.is_symlink()) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
                raise UnsafePathError(f"{key} is not a private file of yours (mode {st.st_mode & 0o7777:04o}, "
                                      f"uid {st.st_uid}); remove it and start again")

    def _task_epilog(self) -> Path:
        """The TaskEpilog: this Python, its commstack, no loader or Python variables of the task's."""
        path = self.root / "etc" / "task-epilog"
        write_atomic(path, f"#!/bin/sh\nexec env -u LD_PRELOAD -u LD_LIBRARY_PATH -u LD_AUDIT "
                           f"{shlex.quote(sys.executable)} -I -m commstack.slurm task-epilog\n", 0o700)
        return path

    def _spawn(self, argv: list[str], daemon: str) -> None:
        exe = shutil.which(argv[0], path=_sbin_path())
        try:
            proc = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, env=self.variables, timeout=60)
        except subprocess.TimeoutExpired:
            proc = subprocess.CompletedProcess(argv, -1, "", "did not go to the background within 60 s")
        if proc.returncode != 0:
            log = self._tail(daemon + ".log")
            self._teardown()
            raise SlurmUnavailableError(f"{daemon} failed to start (exit {proc.returncode}): {proc.stderr.strip()}"
                                        f"\n{log}")
        deadline = time.monotonic() + 10
        while not self.pid(daemon):
            if time.monotonic() > deadline:
                log = self._tail(daemon + ".log")
                self._teardown()
                raise SlurmUnavailableError(f"{daemon} wrote no pid file\n{log}")
            time.sleep(0.1)

    def _teardown(self) -> None:
        """End every job and process of this cluster, whatever state it is in; idempotent."""
        if self.pid("slurmctld"):
            self._cancel(None)
        # slurmd before slurmctld: without its controller slurmd takes ~10 s to go
        for daemon in sorted(self._daemons(), key=lambda d: not d.startswith("slurmd")):
            pid = self.pid(daemon)
            if pid:
                _end(pid, _start_time(pid), signal.SIGTERM, 10)
        # what the daemons leave: slurmstepd (it outlives slurmd) and its tasks, a daemon whose pid file is gone
        for _ in range(50):
            left = {pid: _start_time(pid) for pid in self.processes()}
            if not left:
                break
            for pid, start in left.items():
                _end(pid, start, signal.SIGKILL, 0)
            time.sleep(0.1)
        if self.nodes > 1:
            self._net_down()
        for sub in ("run", "state", "spool", "tmp"):
            shutil.rmtree(self.root / sub, ignore_errors=True)

    def _ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([shutil.which("ip", path=_sbin_path()) or "ip", *args], capture_output=True, text=True,
                              timeout=CLIENT_TIMEOUT)
        if check and proc.returncode != 0:
            self._teardown()
            hint = "" if os.geteuid() == 0 else " (network namespaces need root)"
            raise NamespaceError(f"`ip {' '.join(args)}` failed (exit {proc.returncode}): {proc.stderr.strip()}{hint}")
        return proc

    def _net_up(self) -> None:
        self._ip("link", "add", BRIDGE, "type", "bridge")
        self._ip("addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
        self._ip("link", "set", BRIDGE, "up")
        for n in self.node_names:
            ns = self.netns(n)
            self._ip("netns", "add", ns)
            self._ip("link", "add", self.veth(n), "type", "veth", "peer", "name", "eth0", "netns", ns)
            self._ip("link", "set", self.veth(n), "master", BRIDGE, "up")
            self._ip("-n", ns, "addr", "add", f"{self.address(n)}/24", "dev", "eth0")
            self._ip("-n", ns, "link", "set", "eth0", "up")
            self._ip("-n", ns, "link", "set", "lo", "up")

    def _net_down(self) -> None:
        """Every cs-node namespace (and what still runs in it), csv-node veth and the bridge, whatever N was."""
        if not shutil.which("ip", path=_sbin_path()):
            return
        for ns in re.findall(rf"^({NETNS_PREFIX}\d+)\b", self._ip("netns", "list", check=False).stdout, re.M):
            # slurmstepd and tasks outlive their slurmd: end everything left in the namespace
            for _ in range(50):
                pids = {int(p): _start_time(int(p)) for p in self._ip("netns", "pids", ns, check=False).stdout.split()}
                if not pids:
                    break
                for pid, start in pids.items():
                    _end(pid, start, signal.SIGKILL, 0)
                time.sleep(0.1)
            self._ip("netns", "del", ns, check=False)
        links = self._ip("-o", "link", "show", check=False).stdout
        for name in re.findall(rf"^\d+: ({VETH_PREFIX}\d+|{BRIDGE})[@:]", links, re.M):
            self._ip("link", "del", name, check=False)

    def _tail(self, log: str, lines: int = 15) -> str:
        path = self.root / "log" / log
        if not path.is_file():
            return f"({path} missing)"
        return f"--- {path}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def status(self) -> str:
        self.check_state()
        lines = [f"{d}: {'running pid ' + str(self.pid(d)) if self.pid(d) else 'stopped'}" for d in self._daemons()]
        if self.nodes > 1:
            have = self._ip("netns", "list", check=False).stdout.split()
            lines += [f"{n}: {self.address(n)} in netns {self.netns(n)} "
                      f"({'present' if self.netns(n) in have else 'absent'}), host veth {self.veth(n)} on {BRIDGE}"
                      for n in self.node_names]
        if self.pid("slurmctld"):
            lines += [f"node {n}: {s}{' (' + why + ')' if why else ''}" for n, (s, why) in self.node_states().items()]
        if self.ports():
            lines.append("ports: slurmctld {}, slurmd {}".format(*self.ports()))
        lines.append(f"users: {', '.join(self.leases()) or 'none'}")
        lines.append(f"SLURM_CONF={self.conf}")
        return "\n".join(lines)


def client(argv: list[str], env: dict[str, str], timeout: float = CLIENT_TIMEOUT) -> subprocess.CompletedProcess:
    """A Slurm client (scontrol, squeue, sinfo, scancel) bounded in time: one that gets no answer
    means the controller is lost. In a session of its own: a Ctrl-C pressed again during the clean-up
    must not kill the scancel that gives an allocation back (Python's KeyboardInterrupt ends it when
    it is the first)."""
    try:
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise ControllerLostError(f"`{' '.join(argv)}` got no answer from slurmctld within {timeout:.0f} s") from None


def embedded(system: str, mode: str) -> bool:
    """Whether `--slurm MODE` means the embedded cluster for `--system SYSTEM`, without asking any Slurm."""
    return mode == "local" or (mode == "auto" and system in LOCAL_SYSTEMS)


def choose_slurm(system: str, mode: str) -> str:
    """Which Slurm `--slurm MODE` means for `--system SYSTEM`: 'embedded', 'site' or 'off'.
    The local systems always get the embedded cluster under auto, even on a login node whose
    site Slurm answers: a run on this machine never lands in a production queue by accident.
    Another system needs its site's Slurm (auto and external) unless --slurm local forces ours."""
    if mode == "off":
        return "off"
    if embedded(system, mode):
        return "embedded"
    if mode not in ("auto", "external"):
        raise ValueError(f"unknown --slurm mode {mode!r} (auto, local, external, off)")
    if site_slurm_answers():
        return "site"
    raise SlurmUnavailableError(f"system {system!r} runs on its site's Slurm, and none answers `sinfo` here; "
                                "run on that system's login node, or use --system local (the embedded Slurm)")


def site_slurm_answers() -> bool:
    """Whether a Slurm other than ours answers sinfo with this environment."""
    if not shutil.which("sinfo"):
        return False
    env = dict(os.environ)
    conf = env.get("SLURM_CONF")
    if conf and _is_ours(Path(conf)):
        del env["SLURM_CONF"]
    try:
        return subprocess.run(["sinfo", "-h"], env=env, capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _is_ours(conf: Path) -> bool:
    try:
        with open(conf, errors="replace") as f:
            return f.readline().startswith(CONF_MARK)
    except OSError:
        return False


def _job_tag(lease: str) -> str:
    return f"commstack-lease-{lease}"


def _own_lease() -> str:
    return f"{os.getpid()}-{_start_time(os.getpid())}"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot: with the pid, names one process for good."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(lease: str) -> bool:
    pid, _, start = lease.partition("-")
    return pid.isdigit() and _start_time(int(pid)) == start


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _exe(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        return None


def _euid(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[2])
    except OSError:
        pass
    return None


def _refers_to(pid: int, root: Path) -> bool:
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


def _descendants(parents: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid in _pids():
        ppid = _ppid(pid)
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    out, todo = [], list(parents)
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _end(pid: int, start: str | None, sig: int, grace_s: float) -> None:
    """Signal a process we checked is ours (pid and start time, as it was checked); after grace_s, SIGKILL
    it if it still runs. Through a pidfd: a pid reused in between, by the time of either signal, is never
    signalled."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if start is None or _start_time(pid) != start:  # another process has the pid now
            return
        signal.pidfd_send_signal(fd, sig)
        if grace_s and not select.select([fd], [], [], grace_s)[0]:  # readable once the process ended
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except ProcessLookupError:
        pass
    finally:
        os.close(fd)


#: what names a task's processes in their environment: its cluster, job, step and rank
TASK_MARKS = ("SLURM_CONF", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID")


def leftovers(marks: dict[str, str]) -> list[int]:
    """Processes of ours (our uid), but this one and its parents, whose environment holds every one of
    `marks` (name -> value), as they were started."""
    want = {f"{k}={v}".encode() for k, v in marks.items()}
    mine, pid = set(), os.getpid()
    while pid > 1 and pid not in mine:
        mine.add(pid)
        pid = _ppid(pid) or 1
    found = []
    for pid in _pids():
        if pid in mine or _euid(pid) != os.geteuid():
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
    inside = set(_descendants([launcher]))
    return [] if marked & inside else sorted(marked)


def sweep(marks: dict[str, str], only: list[int] | None = None) -> int:
    """SIGKILL every leftover process with `marks` (through a pidfd, checked as found), or (`only`) those
    of them; how many there were."""
    if not marks:
        return 0
    ended: set[int] = set()
    for _ in range(50):
        left = {pid: _start_time(pid) for pid in leftovers(marks) if only is None or pid in only}
        if not left:
            break
        for pid, start in left.items():
            _end(pid, start, signal.SIGKILL, 0)
        ended |= set(left)
        time.sleep(0.05)
    return len(ended)


def task_epilog() -> None:
    """slurmstepd's TaskEpilog, in the ended task's environment: what the task left behind ends too."""
    marks = {k: os.environ[k] for k in TASK_MARKS if os.environ.get(k)}
    if len(marks) == len(TASK_MARKS):
        sweep(marks)


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _program_path(program: str) -> str | None:
    exe = shutil.which(program, path=_sbin_path())
    return os.path.realpath(exe) if exe else None


def _sbin_path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


if __name__ == "__main__":
    if sys.argv[1:] == ["task-epilog"]:
        task_epilog()
    else:
        sys.exit("usage: python -m commstack.slurm task-epilog (slurmstepd's TaskEpilog)")
