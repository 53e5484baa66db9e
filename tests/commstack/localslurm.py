"""A real single-node Slurm cluster (Debian's slurm-wlm, munge, PMIx plugin) run from a directory of ours.

Nothing outside that directory is touched: munge gets its own key and socket, slurmctld and
slurmd their own state, spool, logs and ports. Clients reach it through SLURM_CONF.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import SlurmUnavailableError

DAEMONS = ("slurmctld", "slurmd", "munged")
DEFAULT_DIR = Path(os.environ.get("COMMSTACK_SLURM_DIR", "/tmp/commstack-slurm"))


@dataclass
class LocalSlurm:
    root: Path = DEFAULT_DIR
    ctld_port: int = 16817
    slurmd_port: int = 16818

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
        return all(self._pid(d) for d in DAEMONS)

    def _write_config(self) -> None:
        for sub in ("etc", "run", "log", "state", "spool", "munge"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        host = socket.gethostname().split(".")[0]
        cpus = os.cpu_count() or 1
        mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        r = self.root
        self.conf.write_text(
            f"""# written by commstack localslurm; state lives in {r}
ClusterName=commstack-local
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge/munge.sock
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={self._pidfile('slurmctld')}
SlurmdPidFile={self._pidfile('slurmd')}
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
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
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN
PartitionName=local Nodes={host} Default=YES MaxTime=INFINITE OverSubscribe=YES State=UP
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
        if self.running():
            return
        self.stop()  # half-started leftovers
        self._write_config()
        r = self.root
        self._spawn(
            ["munged", "--force", f"--socket={r}/munge/munge.sock", f"--key-file={r}/munge/munge.key",
             f"--pid-file={self._pidfile('munged')}", f"--log-file={r}/log/munged.log",
             f"--seed-file={r}/munge/munge.seed"], "munged")
        self._spawn(["slurmctld", "-f", str(self.conf)], "slurmctld")
        self._spawn(["slurmd", "-f", str(self.conf)], "slurmd")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True, text=True)
            states = out.stdout.split()
            if out.returncode == 0 and states and all(s.rstrip("*") in ("idle", "mixed", "allocated") for s in states):
                return
            time.sleep(0.5)
        logs = "\n".join(self._tail(f"{d}.log") for d in ("slurmctld", "slurmd"))
        self.stop()
        raise SlurmUnavailableError(f"local Slurm did not come up within {timeout:.0f} s; last log lines:\n{logs}")

    def _spawn(self, argv: list[str], daemon: str) -> None:
        exe = shutil.which(argv[0], path=_sbin_path())
        proc = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, env=self.env)
        if proc.returncode != 0:
            self.stop()
            raise SlurmUnavailableError(f"{daemon} failed to start (exit {proc.returncode}): {proc.stderr.strip()}"
                                        f"\n{self._tail(daemon + '.log')}")
        deadline = time.monotonic() + 10
        while not self._pid(daemon):
            if time.monotonic() > deadline:
                self.stop()
                raise SlurmUnavailableError(f"{daemon} wrote no pid file\n{self._tail(daemon + '.log')}")
            time.sleep(0.1)

    def _tail(self, log: str, lines: int = 15) -> str:
        path = self.root / "log" / log
        if not path.exists():
            return f"({path} missing)"
        return f"--- {path}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Cancel every job, then stop the daemons; idempotent."""
        if self._pid("slurmctld"):
            subprocess.run(["scancel", "--full", "--quiet", "-u", "root"], env=self.env, capture_output=True)
        for daemon in DAEMONS:
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

    def status(self) -> str:
        lines = [f"{d}: {'running pid ' + str(self._pid(d)) if self._pid(d) else 'stopped'}" for d in DAEMONS]
        lines.append(f"SLURM_CONF={self.conf}")
        return "\n".join(lines)


def _sbin_path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
