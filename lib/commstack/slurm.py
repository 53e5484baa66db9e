"""A real Slurm cluster (Debian's slurm-wlm, munge, PMIx plugin) run from a directory of ours.

Nothing outside that directory is touched: munge gets its own key and socket, slurmctld and
slurmd their own state, spool, logs and ports. Clients reach it through SLURM_CONF.

With nodes=N>1 (LocalSlurm.multinode(N), root only) every node is a network namespace cs-node<i>
(and its own UTS namespace, hostname node<i>) with one veth, eth0 = 10.77.0.(10+i)/24, on the
bridge csbr0 (10.77.0.1 on the host side). slurmctld and munged run on the host; each node runs its
own slurmd inside its namespace. One such cluster per machine: the names and the subnet are fixed.
A host whose firewall drops bridged forwarding (br_netfilter with FORWARD policy DROP) breaks
node-to-node traffic.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from commstack.errors import SlurmUnavailableError

DAEMONS = ("slurmctld", "slurmd", "munged")
DEFAULT_DIR = Path(os.environ.get("COMMSTACK_SLURM_DIR", "/tmp/commstack-slurm"))
MULTINODE_DIR = Path(os.environ.get("COMMSTACK_SLURM_MN_DIR", "/tmp/commstack-slurm-mn"))
BRIDGE, SUBNET, NETNS_PREFIX, VETH_PREFIX = "csbr0", "10.77.0", "cs-node", "csv-node"


class NamespaceError(SlurmUnavailableError):
    """The namespaces, veths or bridge of the multi-node cluster could not be made (not root, no iproute2)."""


@dataclass
class LocalSlurm:
    root: Path = DEFAULT_DIR
    ctld_port: int = 16817
    slurmd_port: int = 16818
    nodes: int = 1

    @classmethod
    def multinode(cls, nodes: int | None = None) -> "LocalSlurm":
        """Its own directory and ports, so it runs beside the single-node cluster.
        nodes=None: as many as the existing slurm.conf names (stop, status), else 2."""
        if nodes is None:
            conf = MULTINODE_DIR / "etc" / "slurm.conf"
            nodes = len(re.findall(r"^NodeName=", conf.read_text(), re.M)) if conf.exists() else 2
        if nodes < 2:
            raise ValueError("a multi-node cluster has 2 nodes or more")
        return cls(MULTINODE_DIR, 16827, 16828, nodes)

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
    def env(self) -> dict[str, str]:
        """Environment for Slurm clients (srun, salloc, scancel, sinfo) of this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def _pidfile(self, daemon: str) -> Path:
        return self.root / "run" / f"{daemon}.pid"

    def _pid(self, daemon: str) -> int | None:
        try:
            pid = int(self._pidfile(daemon).read_text().strip())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def running(self) -> bool:
        return all(self._pid(d) for d in self._daemons())

    def _write_config(self) -> None:
        for sub in ("etc", "run", "log", "state", "spool", "munge"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        host = socket.gethostname().split(".")[0]
        cpus = os.cpu_count() or 1
        mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        r = self.root
        if self.nodes == 1:
            ctld_addr, pidfile, spool, slurmd_log, extra = \
                "127.0.0.1", self._pidfile("slurmd"), f"{r}/spool", f"{r}/log/slurmd.log", ""
            node_lines = f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN"
            part_nodes = host
        else:
            # %n: each slurmd its own pid file, spool and log. TmpFS per node too: the PMIx plugin makes
            # <TmpFS>/spmix_appdir_<uid>_<job>.<step> on every node, and all nodes share this /tmp.
            # SlurmdTimeout short so that a dead node is declared DOWN (NODE_FAIL) within ~20 s.
            ctld_addr, pidfile, spool, slurmd_log = \
                f"{SUBNET}.1", self._pidfile("slurmd-%n"), f"{r}/spool/%n", f"{r}/log/slurmd-%n.log"
            extra = f"TmpFS={r}/tmp/%n\nSlurmdTimeout=15\n"
            node_lines = "\n".join(f"NodeName={n} NodeAddr={self.address(n)} CPUs={cpus} "
                                   f"RealMemory={mem_mb // self.nodes} State=UNKNOWN" for n in self.node_names)
            part_nodes = ",".join(self.node_names)
            for n in self.node_names:
                (r / "spool" / n).mkdir(exist_ok=True)
                (r / "tmp" / n).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(
            f"""# written by commstack localslurm; state lives in {r}
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
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=5
InactiveLimit=0
MinJobAge=30
{extra}{node_lines}
PartitionName=local Nodes={part_nodes} Default=YES MaxTime=INFINITE OverSubscribe=YES State=UP
"""
        )
        key = self.root / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o400)

    def start(self, timeout: float = 30.0) -> None:
        missing = [d for d in DAEMONS + ("srun", "sinfo") if not shutil.which(d, path=_sbin_path())]
        if missing:
            raise SlurmUnavailableError(
                f"cannot start the local Slurm: {', '.join(missing)} not found "
                "(install slurm-wlm, slurm-client and munge: ci/install-deps.sh)"
            )
        if self.nodes > 1 and not shutil.which("ip", path=_sbin_path()):
            raise NamespaceError("cannot start the multi-node local Slurm: ip not found (install iproute2)")
        if self.running():
            return
        self.stop()  # half-started leftovers
        self._write_config()
        if self.nodes > 1:
            self._net_up()
        r = self.root
        self._spawn(
            ["munged", "--force", f"--socket={r}/munge/munge.sock", f"--key-file={r}/munge/munge.key",
             f"--pid-file={self._pidfile('munged')}", f"--log-file={r}/log/munged.log",
             f"--seed-file={r}/munge/munge.seed"], "munged")
        self._spawn(["slurmctld", "-f", str(self.conf)], "slurmctld")
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
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True, text=True)
            states = out.stdout.split()
            if out.returncode == 0 and states and all(s.rstrip("*") in ("idle", "mixed", "allocated") for s in states):
                return
            time.sleep(0.5)
        logs = "\n".join(self._tail(f"{d}.log") for d in self._daemons() if d != "munged")
        self.stop()
        raise SlurmUnavailableError(f"local Slurm did not come up within {timeout:.0f} s; last log lines:\n{logs}")

    def _spawn(self, argv: list[str], daemon: str) -> None:
        exe = shutil.which(argv[0], path=_sbin_path())
        proc = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, env=self.env)
        if proc.returncode != 0:
            log = self._tail(daemon + ".log")
            self.stop()
            raise SlurmUnavailableError(f"{daemon} failed to start (exit {proc.returncode}): {proc.stderr.strip()}"
                                        f"\n{log}")
        deadline = time.monotonic() + 10
        while not self._pid(daemon):
            if time.monotonic() > deadline:
                log = self._tail(daemon + ".log")
                self.stop()
                raise SlurmUnavailableError(f"{daemon} wrote no pid file\n{log}")
            time.sleep(0.1)

    def _ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([shutil.which("ip", path=_sbin_path()) or "ip", *args], capture_output=True, text=True)
        if check and proc.returncode != 0:
            self.stop()
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
                pids = [int(p) for p in self._ip("netns", "pids", ns, check=False).stdout.split()]
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.1)
            self._ip("netns", "del", ns, check=False)
        links = self._ip("-o", "link", "show", check=False).stdout
        for name in re.findall(rf"^\d+: ({VETH_PREFIX}\d+|{BRIDGE})[@:]", links, re.M):
            self._ip("link", "del", name, check=False)

    def _tail(self, log: str, lines: int = 15) -> str:
        path = self.root / "log" / log
        if not path.exists():
            return f"({path} missing)"
        return f"--- {path}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Cancel every job, then stop the daemons; idempotent. A multi-node cluster also loses its
        namespaces, veths, bridge and directory."""
        if self._pid("slurmctld"):
            subprocess.run(["scancel", "--full", "--quiet", "-u", "root"], env=self.env, capture_output=True)
        for daemon in self._daemons():
            pid = self._pid(daemon)
            if pid:
                os.kill(pid, signal.SIGTERM)
                for _ in range(100):
                    try:
                        os.kill(pid, 0)
                    except OSError:
                        break
                    time.sleep(0.1)
                else:
                    os.kill(pid, signal.SIGKILL)
            self._pidfile(daemon).unlink(missing_ok=True)
        if self.nodes > 1:
            self._net_down()
            shutil.rmtree(self.root, ignore_errors=True)

    def status(self) -> str:
        lines = [f"{d}: {'running pid ' + str(self._pid(d)) if self._pid(d) else 'stopped'}" for d in self._daemons()]
        if self.nodes > 1:
            have = self._ip("netns", "list", check=False).stdout.split()
            lines += [f"{n}: {self.address(n)} in netns {self.netns(n)} "
                      f"({'present' if self.netns(n) in have else 'absent'}), host veth {self.veth(n)} on {BRIDGE}"
                      for n in self.node_names]
        lines.append(f"SLURM_CONF={self.conf}")
        return "\n".join(lines)


def _sbin_path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
