"""A local cluster's files: its private directory, its ports, slurm.conf, the munge key and the TaskEpilog.

The directory (DEVELOPERS.md; the multi-node cluster's .../slurm-mn, COMMSTACK_SLURM_MN_DIR) is made 0700 and
refused when it is a symlink, someone else's or open to others; its ports: docs/harness.md#on-a-cluster. Every file
in it is written atomically, the munge key 0400 from the start. Nothing outside it is touched: munge gets its own key
and socket, slurmctld and slurmd their own state, spool, logs and ports; clients reach it through SLURM_CONF.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

from commstack.errors import SlurmUnavailableError
from commstack.files import UnsafePathError, private_dir, write_atomic
from commstack.slurm import namespaces, procs

CONF_MARK = "# written by commstack localslurm"
EPILOG = (f"#!/bin/sh\nexec env -u LD_PRELOAD -u LD_LIBRARY_PATH -u LD_AUDIT {shlex.quote(sys.executable)} -I -m "
          "commstack.slurm task-epilog\n")


def state_home() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "commstack" if runtime else Path.home() / ".local" / "state" / "commstack"


def cluster_dir(variable: str, name: str) -> Path:
    return Path(os.environ.get(variable) or state_home() / name)


def given_port() -> int | None:
    """slurmctld's port when COMMSTACK_SLURM_PORT fixes it (slurmd's is the next one); else None: chosen."""
    raw = os.environ.get("COMMSTACK_SLURM_PORT")
    if raw and not (raw.isdigit() and 1024 <= int(raw) < 65535):
        raise SlurmUnavailableError(f"COMMSTACK_SLURM_PORT={raw!r}: a port number from 1024 to 65534")
    return int(raw) if raw else None


class PortInUseError(SlurmUnavailableError):
    """A port COMMSTACK_SLURM_PORT fixes is held by another listener: our daemons would talk to it."""


def check_free(ports: tuple[int, ...]) -> None:
    """PortInUseError naming the owner of the first of `ports` something listens on, before a daemon of ours
    binds or sends to it (a fixed port another user holds would get slurmd's and the clients' messages)."""
    for port in ports:
        for uid in procs.listening(port).values():
            raise PortInUseError(f"port {port} is in use by uid {uid}: COMMSTACK_SLURM_PORT fixes slurmctld's port "
                                 "and the next for slurmd; give free ones, or leave it unset (free ports are chosen)")


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports nobody listens on now, as the kernel hands out for port 0."""
    with contextlib.ExitStack() as held:  # every one bound until all are: no port twice
        socks = [held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for s in socks:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in socks]


def conf_path(root: Path) -> Path:
    return root / "etc" / "slurm.conf"


def pidfile(root: Path, daemon: str) -> Path:
    return root / "run" / f"{daemon}.pid"


def write(root: Path, node_names: list[str], ctld_port: int, slurmd_port: int, leaf_switches: int = 0) -> None:
    """The private subdirectories of the cluster in `root`, its slurm.conf (replacing whatever is in its place),
    with leaf_switches > 0 its topology.conf (leaf1.. under one spine, the nodes split evenly in order), the
    TaskEpilog script and, unless one is there already, the munge key; a key that is not a private file of
    ours is refused."""
    r, nodes = root, len(node_names)
    subdirs = ["etc", "run", "log", "state", "spool", "munge", "tmp"]
    if nodes > 1:
        subdirs += [*(f"spool/{n}" for n in node_names), *(f"tmp/{n}" for n in node_names)]
    for sub in subdirs:
        private_dir(r / sub)
    host = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 1
    mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    # TmpFS of our own: the PMIx plugin makes <TmpFS>/spmix_appdir_<uid>_<job>.<step>, and a
    # slurmstepd that was killed leaves it, which fails the next cluster's step of that number.
    # Several nodes, %n: each slurmd its own pid file, spool, log and TmpFS (the PMIx plugin's directory is
    # per step and node, and all nodes share one file system).
    slurmd, each = ("slurmd", "") if nodes == 1 else ("slurmd-%n", "/%n")
    ctld_addr = "127.0.0.1" if nodes == 1 else f"{namespaces.SUBNET}.1"
    addresses = {host: "127.0.0.1"} if nodes == 1 else {n: namespaces.address(n) for n in node_names}
    # SlurmdTimeout short so that a dead node is declared DOWN (NODE_FAIL) within ~20 s.
    extra = f"TmpFS={r}/tmp{each}\n" + ("" if nodes == 1 else "SlurmdTimeout=15\n")
    node_lines = "\n".join(f"NodeName={n} NodeAddr={a} CPUs={cpus} RealMemory={mem_mb // nodes} State=UNKNOWN"
                           for n, a in addresses.items())
    if leaf_switches:
        if not 1 <= leaf_switches <= nodes:
            raise ValueError(f"{leaf_switches} leaf switches for {nodes} nodes: 1 to {nodes}")
        extra += "TopologyPlugin=topology/tree\n"
        per = -(-nodes // leaf_switches)
        leaves = [node_names[i:i + per] for i in range(0, nodes, per)]
        write_atomic(r / "etc" / "topology.conf", "".join(
            f"SwitchName=leaf{i} Nodes={','.join(members)}\n" for i, members in enumerate(leaves, 1))
            + f"SwitchName=spine Switches={','.join(f'leaf{i}' for i in range(1, len(leaves) + 1))}\n")
    elif (r / "etc" / "topology.conf").is_file():
        (r / "etc" / "topology.conf").unlink()
    for own in (conf_path(r), r / "etc" / "task-epilog"):  # the private directory's: replaced whatever they are
        if own.is_symlink():
            own.unlink()
    write_atomic(conf_path(r), f"""{CONF_MARK}; state lives in {r}
ClusterName=commstack-local
SlurmctldHost={host}({ctld_addr})
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge/munge.sock
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool{each}
SlurmctldPidFile={pidfile(r, 'slurmctld')}
SlurmdPidFile={pidfile(r, slurmd)}
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/{slurmd}.log
# no cgroups in a container or CI sandbox
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
# what a task leaves running ends with it (proctrack/linuxproc only follows parents)
TaskEpilog={task_epilog(r)}
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=5
InactiveLimit=0
MinJobAge=30
# job ids of this cluster alone: Open MPI names its shared memory and session files after the PMIx
# namespace, slurm.pmix.<job>.<step>, so two clusters on one host that both start at job 1 had ranks map
# each other's segments (a segfault in btl_vader when two test runs ran at once). No two clusters up at
# once share a slurmctld port, and every port's range is below Slurm's MaxJobId (67043328).
FirstJobId={ctld_port * 1000}
{extra}{node_lines}
PartitionName=local Nodes={','.join(addresses)} Default=YES MaxTime=INFINITE OverSubscribe=YES State=UP
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


def task_epilog(root: Path) -> Path:
    """The TaskEpilog: this Python, its commstack, no loader or Python variables of the task's."""
    path = root / "etc" / "task-epilog"
    write_atomic(path, EPILOG, 0o700)
    return path


def epilog_runs(root: Path) -> bool:
    """Whether the TaskEpilog of the cluster in `root` still runs: this checkout's, or one whose Python still
    imports its commstack. A cluster outlives the checkout that started it; with that one deleted, every task
    of it would end with "task-epilog failed" and leave its processes. One that is not ours as task_epilog writes it
    (empty, not text, a quote left open) does not run: the caller starts the cluster afresh, writing it again."""
    try:
        text = (root / "etc" / "task-epilog").read_text()
        if text == EPILOG:
            return True
        words = shlex.split(text.splitlines()[-1]) if text.strip() else []
    except (OSError, ValueError):  # ValueError: not UTF-8, or shlex's open quote
        return False
    python = next((w for w, after in itertools.pairwise(words) if after == "-I"), None)
    try:
        return python is not None and subprocess.run([python, "-I", "-c", "import commstack.slurm.procs"], env={},
                                                     capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def is_ours(conf: Path) -> bool:
    try:
        with open(conf, errors="replace") as f:
            return f.readline().startswith(CONF_MARK)
    except OSError:
        return False
