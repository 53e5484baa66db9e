"""The embedded Slurm: a real cluster (Debian's slurm-wlm, munge, PMIx plugin) run from a private directory of ours,
its daemons as root (SlurmUser=root). LocalSlurm starts or joins it under a lease, waits until its nodes take jobs,
and stops it for its last user; a process of it is trusted or signalled only once found ours (pid, _ours).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from commstack.errors import EmbeddedSlurmNeedsRootError, SlurmUnavailableError
from commstack.files import private_path
from commstack.slurm import config, namespaces, procs
from commstack.slurm.clients import CLIENT_TIMEOUT, STATE_FLAGS, choose_slurm, client, node_states
from commstack.slurm.leases import MANUAL, Leases, job_tag, own

DAEMONS = ("slurmctld", "slurmd", "munged")
PROGRAMS = DAEMONS + ("slurmstepd",)  # what a cluster of ours runs; stop() leaves none of them
READY = {"idle", "mixed", "allocated", "completing"}
RESUMABLE = {"drained", "draining", "drain", "down", "fail", "failing"}


class NodeDrainedError(SlurmUnavailableError):
    """A node of the local cluster is drained or down and `scontrol update state=resume` did not bring it back."""


@dataclass
class LocalSlurm:
    root: Path = field(default_factory=lambda: config.cluster_dir("COMMSTACK_SLURM_DIR", "slurm"))
    #: slurmctld's and slurmd's ports; None: COMMSTACK_SLURM_PORT's, else chosen free when it starts
    ctld_port: int | None = None
    slurmd_port: int | None = None
    nodes: int = 1
    #: leaf switches of its topology.conf (topology/tree), the nodes split evenly in order; 0: no topology
    leaf_switches: int = 0

    def __post_init__(self) -> None:
        self.root = Path(self.root).absolute()
        port = config.given_port()
        if self.ctld_port is None and port:
            self.ctld_port, self.slurmd_port = port, port + 1
        self._choose_ports = self.ctld_port is None
        self.leases = Leases(self.root)

    def ports(self) -> tuple[int, int] | None:
        """(slurmctld, slurmd) as its slurm.conf records them."""
        try:
            text = self.conf.read_text()
        except OSError:
            return None
        found = dict(re.findall(r"^(SlurmctldPort|SlurmdPort)=(\d+)$", text, re.M))
        return (int(found["SlurmctldPort"]), int(found["SlurmdPort"])) if len(found) == 2 else None

    @classmethod
    def multinode(cls, nodes: int | None = None, leaf_switches: int = 0) -> "LocalSlurm":
        """Its own directory and ports, so it runs beside the single-node cluster.
        nodes=None: as many as the existing slurm.conf names (stop, status), else 2."""
        root = config.cluster_dir("COMMSTACK_SLURM_MN_DIR", "slurm-mn")
        if nodes is None:
            conf = config.conf_path(root)
            nodes = len(re.findall(r"^NodeName=", conf.read_text(), re.M)) if conf.is_file() else 2
        if nodes < 2:
            raise ValueError("a multi-node cluster has 2 nodes or more")
        namespaces.check_count(nodes)
        return cls(root, nodes=nodes, leaf_switches=leaf_switches)

    @classmethod
    def for_system(cls, system: str, nodes: int | None) -> "LocalSlurm":
        return cls.multinode(nodes) if system == "local-multinode" else cls()

    def check_state(self) -> Path:
        """Its state directory, and a commstack state home above it, private under parents nobody else can change
        (files.private_path); UnsafePathError when someone else prepared it."""
        if self.root.parent == config.state_home():
            private_path(config.state_home())
        return private_path(self.root)

    @property
    def node_names(self) -> list[str]:
        if self.nodes == 1:
            return [socket.gethostname().split(".")[0]]
        return [f"node{i}" for i in range(1, self.nodes + 1)]

    def _daemons(self) -> tuple[str, ...]:
        if self.nodes == 1:
            return DAEMONS
        return ("slurmctld", *(f"slurmd-{n}" for n in self.node_names), "munged")

    @property
    def conf(self) -> Path:
        return config.conf_path(self.root)

    @property
    def variables(self) -> dict[str, str]:
        """Environment for Slurm clients (srun, salloc, scancel, sinfo) of this cluster: none of the
        site's SLURM_* (a SLURM_JOB_ID of a site allocation names no job here); the lease variable makes
        Allocation tag its jobs as this process's."""
        kept = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**kept, "SLURM_CONF": str(self.conf), "COMMSTACK_SLURM_LEASE": job_tag(own())}

    # --- processes: only ours are trusted or signalled -------------------------------------------

    def pid(self, daemon: str) -> int | None:
        """The pid in a daemon's pid file, when that process is the daemon of this cluster."""
        try:
            fd = os.open(config.pidfile(self.root, daemon), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd) as f:
                pid = int(f.read(32).strip())
        except (OSError, ValueError):
            return None
        return pid if self._ours(pid, daemon.split("-")[0]) else None

    def _ours(self, pid: int, program: str | None = None) -> bool:
        """pid runs one of our programs (`program`, else any in PROGRAMS), as us, about this directory."""
        exe = procs.exe(pid)
        want = [program] if program else PROGRAMS
        return exe is not None and exe in {procs.program_path(p) for p in want} and procs.euid(pid) == os.geteuid() \
            and procs.refers_to(pid, self.root)

    def processes(self) -> list[int]:
        """Every process of this cluster: its daemons, their slurmstepd and the tasks those run."""
        found = [pid for pid in procs.pids() if self._ours(pid)]
        stepds = [pid for pid in found if procs.exe(pid) == procs.program_path("slurmstepd")]
        return found + [pid for pid in procs.descendants(stepds) if pid not in found]

    def running(self) -> bool:
        return all(self.pid(d) for d in self._daemons())

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        self.check_state()
        return self.leases.locked()

    def _prune(self) -> None:
        """Drop the leases of processes that died, and cancel the jobs they left."""
        dead = self.leases.dead()
        if dead and self.pid("slurmctld"):
            self._cancel({job_tag(n) for n in dead})
        for n in dead:
            self.leases.drop(n)

    @staticmethod
    def check_root() -> None:
        if os.geteuid() != 0:
            raise EmbeddedSlurmNeedsRootError(
                "the embedded Slurm needs root: run as root or with sudo, or use --slurm external")

    def start(self, timeout: float = 30.0, manual: bool = False, heal: bool = True) -> None:
        """Start the cluster unless it runs, and take a lease on it: this process's, or with
        manual=True the one `commstack slurm stop` gives back. heal=False: a running cluster is joined as it is,
        its drained or down nodes left so (commstack screen reports them); one it starts is always healed."""
        self.check_root()
        missing = [d for d in PROGRAMS + ("srun", "sinfo") if not shutil.which(d, path=procs.sbin_path())]
        if missing:
            raise SlurmUnavailableError(
                f"cannot start the local Slurm: {', '.join(missing)} not found "
                "(install slurm-wlm, slurm-client and munge: ci/install-deps.sh)"
            )
        if self.nodes > 1 and not shutil.which("ip", path=procs.sbin_path()):
            raise namespaces.NamespaceError("cannot start the multi-node local Slurm: ip not found (install iproute2)")
        with self._locked():
            self._prune()
            launched = not self.running() or not config.epilog_runs(self.root)  # its checkout may be gone
            if launched:
                self._teardown()  # half-started leftovers, or a cluster whose controller died
            try:
                if launched:
                    self._launch()
                self._ready(timeout, resume=heal or launched)
            except BaseException:  # a failure, or Ctrl-C while it starts: a cluster others use is left as it is
                if launched:
                    self._teardown()
                raise
            self.leases.take(MANUAL if manual else own())

    def stop(self, manual: bool = False, force: bool = False) -> bool:
        """Give back this process's lease (manual=True: the `commstack slurm start` one). The last
        user (or force=True) shuts the cluster down: every job, daemon, slurmstepd and task of it
        ends, and a multi-node cluster loses its namespaces, veths and bridge. While others still
        use it, only this lease's jobs are cancelled. Returns whether the cluster was shut down."""
        with self._locked():
            mine = MANUAL if manual else own()
            if self.pid("slurmctld"):
                self._cancel({job_tag(mine)})
            self.leases.drop(mine)
            self._prune()
            if self.leases.live() and not force:
                return False
            for n in self.leases.all():
                self.leases.drop(n)
            self._teardown()
            return True

    def _launch(self) -> None:
        if self._choose_ports:  # for this life of the cluster; its slurm.conf records them
            self.ctld_port, self.slurmd_port = config.free_ports(2)
        else:  # given: nobody else may hold them (our own daemons of an earlier life are gone: _teardown)
            config.check_free((self.ctld_port, self.slurmd_port))
        config.write(self.root, self.node_names, self.ctld_port, self.slurmd_port, self.leaf_switches)
        if self.nodes > 1:
            namespaces.up(self.node_names)
        r = self.root
        self._spawn(
            ["munged", "--force", f"--socket={r}/munge/munge.sock", f"--key-file={r}/munge/munge.key",
             f"--pid-file={config.pidfile(r, 'munged')}", f"--log-file={r}/log/munged.log",
             f"--seed-file={r}/munge/munge.seed"], "munged")
        # -c: no job of an earlier life is recovered; its processes were ended by _teardown
        self._spawn(["slurmctld", "-c", "-f", str(self.conf)], "slurmctld")
        if self.nodes == 1:
            self._spawn(["slurmd", "-f", str(self.conf)], "slurmd")
        else:
            slurmd = shutil.which("slurmd", path=procs.sbin_path())
            for n in self.node_names:
                # nsenter, not `ip netns exec`: that one remounts /sys, and slurmd dies without /sys/fs/cgroup.
                # Its own UTS namespace too: tasks see hostname node<i> (srun hostname, Open MPI session dirs).
                self._spawn(["nsenter", f"--net=/run/netns/{namespaces.netns(n)}", "unshare", "--uts", "sh", "-c",
                             'hostname "$1" && exec "$2" -f "$3" -N "$1"', "sh", n, slurmd, str(self.conf)],
                            f"slurmd-{n}")

    def _ready(self, timeout: float, resume: bool = True) -> None:
        """Wait until every node takes jobs; a drained or down node is resumed once, then reported. resume=False:
        until every node takes jobs or is drained or down, as it is."""
        deadline = time.monotonic() + timeout
        resumed: set[str] = set()
        while True:
            nodes = self.node_states()
            # a node that takes jobs answers (no `*`); without resume a drained or down one is settled as it is
            if nodes and all(state in READY or (not resume and state.rstrip("*") in RESUMABLE)
                             for state, _ in nodes.values()):
                return
            stuck = {n: sr for n, sr in nodes.items() if sr[0].rstrip("*") in RESUMABLE}
            for n in (set(stuck) - resumed) if resume else ():
                client(["scontrol", "update", f"nodename={n}", "state=resume"], self.variables)
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
        """node -> (state, reason) as sinfo says, flags dropped but `*` (not responding: such a node is not ready,
        whatever its state); {} while the controller does not answer."""
        return {n: (state.rstrip(STATE_FLAGS) + ("*" if state.endswith("*") else ""), "" if why == "none" else why)
                for n, (state, why) in node_states(self.variables, check=False).items()}

    def jobs(self, timeout: float = CLIENT_TIMEOUT) -> list[tuple[str, str, str]]:
        """(job id, state, comment) of every job in the queue."""
        argv = ["squeue", "-h", "-o", "%i|%T|%k"]
        proc = client(argv, self.variables, timeout)
        if proc.returncode != 0:
            raise SlurmUnavailableError(f"`{' '.join(argv)}` failed (exit {proc.returncode}): {proc.stderr.strip()}")
        return [tuple(line.split("|", 2)) for line in proc.stdout.splitlines()]  # type: ignore[misc]

    def _cancel(self, tags: set[str] | None) -> None:
        """Cancel the jobs whose comment is one of `tags` (None: every job), by job id."""
        try:
            ids = [i for i, _, k in self.jobs(timeout=10) if tags is None or k in tags]
            if ids:
                client(["scancel", "--quiet", *ids], self.variables, 10)
        except SlurmUnavailableError:
            pass  # nothing to cancel through a dead controller; _teardown ends the processes

    def _spawn(self, argv: list[str], daemon: str) -> None:
        exe = shutil.which(argv[0], path=procs.sbin_path())
        try:
            proc = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, env=self.variables, timeout=60)
        except subprocess.TimeoutExpired:
            proc = subprocess.CompletedProcess(argv, -1, "", "did not go to the background within 60 s")
        failed = f"failed to start (exit {proc.returncode}): {proc.stderr.strip()}" if proc.returncode else None
        deadline = time.monotonic() + 10
        while not failed and not self.pid(daemon):
            failed = "wrote no pid file" if time.monotonic() > deadline else None
            time.sleep(0.1)
        if failed:
            log = self._tail(daemon + ".log")
            self._teardown()
            raise SlurmUnavailableError(f"{daemon} {failed}\n{log}")

    def _teardown(self) -> None:
        """End every job and process of this cluster, whatever state it is in."""
        if self.pid("slurmctld"):
            self._cancel(None)
        # slurmd before slurmctld: without its controller slurmd takes ~10 s to go
        for daemon in sorted(self._daemons(), key=lambda d: not d.startswith("slurmd")):
            pid = self.pid(daemon)
            if pid:
                procs.end(pid, procs.start_time(pid), signal.SIGTERM, 10)
        # what the daemons leave: slurmstepd (it outlives slurmd) and its tasks, a daemon whose pid file is gone
        procs.kill_all(self.processes)
        if self.nodes > 1:
            namespaces.down()
        for sub in ("run", "state", "spool", "tmp"):
            shutil.rmtree(self.root / sub, ignore_errors=True)

    def _tail(self, log: str, lines: int = 15) -> str:
        path = self.root / "log" / log
        if not path.is_file():
            return f"({path} missing)"
        return f"--- {path}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def status(self) -> str:
        self.check_state()
        lines = [f"{d}: {'running pid ' + str(self.pid(d)) if self.pid(d) else 'stopped'}" for d in self._daemons()]
        if self.nodes > 1:
            have = namespaces.present()
            lines += [f"{n}: {namespaces.address(n)} in netns {namespaces.netns(n)} "
                      f"({'present' if namespaces.netns(n) in have else 'absent'}), host veth {namespaces.veth(n)} "
                      f"on {namespaces.BRIDGE}" for n in self.node_names]
        if self.pid("slurmctld"):
            lines += [f"node {n}: {s}{' (' + why + ')' if why else ''}" for n, (s, why) in self.node_states().items()]
        if self.ports():
            lines.append("ports: slurmctld {}, slurmd {}".format(*self.ports()))
        lines.append(f"users: {', '.join(self.leases.live()) or 'none'}")
        lines.append(f"SLURM_CONF={self.conf}")
        return "\n".join(lines)


def take_slurm(system: str, mode: str, cleanup: contextlib.ExitStack, nodes: int | None, off: str,
               timed: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
               heal: bool = True) -> dict[str, str]:
    """The Slurm `--slurm MODE` gives `system`: the site's (this environment), or the embedded cluster (of `nodes`
    nodes for local-multinode; None: the one running) started or joined under a lease that `cleanup` gives back
    (heal: LocalSlurm.start's). `off`: what to do instead, when Slurm is off."""
    which = choose_slurm(system, mode)
    if which == "off":
        raise SlurmUnavailableError(f"Slurm is off (--slurm off); {off}")
    if which == "site":
        return dict(os.environ)
    cluster = LocalSlurm.for_system(system, nodes)
    cluster.check_state()  # a state directory someone else prepared: nothing to stop either
    cleanup.callback(cluster.stop)  # gives our lease back; the last user stops it
    with timed():
        cluster.start(heal=heal)
    return cluster.variables
