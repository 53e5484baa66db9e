"""Talking to a Slurm, ours or the site's: which one a run uses (choose_slurm), and its clients, bounded in time.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from commstack.errors import ControllerLostError, SlurmUnavailableError
from commstack.slurm.config import is_ours

LOCAL_SYSTEMS = frozenset({"local", "local-multinode"})  # systems that run on the embedded Slurm
CLIENT_TIMEOUT = 30.0  # s for scontrol, squeue, sinfo, scancel: a dead controller must not hang us


@functools.cache
def executable(name: str) -> str:
    """The absolute path of a program commstack runs (srun, salloc, sbatch, scontrol, mpirun), looked up once in
    commstack's own PATH: nothing a system or suite file sets changes which one runs. `name` where none is found
    (running it says so)."""
    found = shutil.which(name)
    return os.path.abspath(found) if found else name


def client(argv: list[str], env: dict[str, str], timeout: float = CLIENT_TIMEOUT) -> subprocess.CompletedProcess:
    """A Slurm client (scontrol, squeue, sinfo, scancel) bounded in time: one that gets no answer
    means the controller is lost. In a session of its own: a Ctrl-C pressed again during the clean-up
    must not kill the scancel that gives an allocation back (Python's KeyboardInterrupt ends it when
    it is the first)."""
    try:
        return subprocess.run(argv, executable=executable(argv[0]), env=env, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise ControllerLostError(f"`{' '.join(argv)}` got no answer from slurmctld within {timeout:.0f} s") from None


#: what sinfo's %T puts after a node's state (sinfo(1), NODE STATE CODES); `*`: not responding
STATE_FLAGS = "*~#!%$@^-+"


def node_states(variables: dict[str, str], partition: str | None = None,
                check: bool = True) -> dict[str, tuple[str, str]]:
    """node -> (state, reason) as sinfo prints them (a node in several partitions: its first line); where sinfo
    fails, SlurmUnavailableError, or with check=False {}."""
    argv = ["sinfo", "-h", "-N", "-o", "%N|%T|%E"] + ([f"--partition={partition}"] if partition else [])
    out = client(argv, variables)
    if out.returncode != 0:
        if not check:
            return {}
        raise SlurmUnavailableError(f"`{' '.join(argv)}` failed: {out.stderr.strip()}")
    states = {}
    for line in out.stdout.splitlines():
        name, state, reason = (line.split("|", 2) + ["", ""])[:3]
        states.setdefault(name.strip(), (state.strip().lower(), reason.strip()))
    return states


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
    if conf and is_ours(Path(conf)):
        del env["SLURM_CONF"]
    try:
        return client(["sinfo", "-h"], env, 20).returncode == 0
    except ControllerLostError:
        return False
