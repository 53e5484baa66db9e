"""An installed Spack env whose view a run takes its binaries from (`--env ENV`, a system's `install: {env: ...}`):
checked by commstack.spack.trust, then read through Spack itself (scripts/env_view.py, no package code imported),
never by guessing paths. What is refused, and how: docs/harness.md (the table of envs)."""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import tempfile
from dataclasses import dataclass
from pathlib import Path

from commstack.errors import BinaryNotFoundError
from commstack.spack import NO_SPACK, Spack, SpackError, find_spack
from commstack.spack.envs import WrongHostError
from commstack.spack.trust import check_env, check_tree, resolve_trusted


class EnvNotFoundError(SpackError):
    """--env names no Spack env (no spack.yaml)."""


class EnvNotConcretizedError(SpackError):
    """The env has no spack.lock."""


class StaleLockError(SpackError):
    """The env's spack.lock does not hold the roots its spack.yaml asks for."""


class EnvNotInstalledError(SpackError):
    """Nothing of the env is installed, or it has no view to take binaries from."""


class EnvPartlyInstalledError(BinaryNotFoundError):
    """A spec a step needs is in the env's lock but not installed."""


class ForeignBinaryError(BinaryNotFoundError):
    """A binary of the view is for another machine than this host's."""


#: ELF e_machine -> the machine as `uname -m` names it
ELF_MACHINES = {3: "i386", 62: "x86_64", 183: "aarch64", 243: "riscv64", 21: "ppc64le"}


def elf_machine(path: Path) -> str | None:
    """The machine an ELF file is built for (its header's e_machine); None for a script or anything else."""
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    number = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
    return ELF_MACHINES.get(number, f"ELF machine {number}")


@dataclass(frozen=True)
class Node:
    """One spec of the env's lock."""

    name: str
    version: str
    hash: str
    prefix: str
    installed: bool
    external: bool
    target: str
    family: str
    runs_here: bool
    in_view: str | None  # where the view puts its prefix (None: an external, not in any view)
    mpi: bool
    root: bool

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}/{self.hash[:7]}"


@dataclass(frozen=True)
class EnvView:
    """An installed env: its directory, its lock's sha256, its view and the nodes of its lock."""

    path: Path
    lock_sha256: str
    view: Path
    nodes: tuple[Node, ...]

    def node(self, name: str) -> Node | None:
        return next((n for n in self.nodes if n.name == name), None)

    def program(self, spec: str, path: str, what: str) -> tuple[str, dict]:
        """`path` under the view's prefix of the env's `spec`, and where it came from (for the record)."""
        node = self.node(spec)
        fix = f"spack -e {self.path} install"
        if node is None:
            raise BinaryNotFoundError(f"env {self.path} has no {spec}, the spec that provides {what}: add {spec} to "
                                      f"its spack.yaml, then `spack -e {self.path} concretize` and `{fix}`")
        if not node.installed:
            raise EnvPartlyInstalledError(f"env {self.path} is partly installed: {node.label}, which provides "
                                          f"{what}, is in its lock but not installed: `{fix}`")
        found = Path(node.in_view or node.prefix) / path
        if not found.exists():
            where = f"view {self.view}" if node.in_view else f"external prefix {node.prefix}"
            raise BinaryNotFoundError(f"env {self.path}: {node.label} is installed, but its {path} is not in its "
                                      f"{where}: `spack -e {self.path} env view regenerate`")
        if Path(node.prefix).exists():  # the libraries its binaries load (an external's may lie elsewhere)
            self.trusted(Path(node.prefix), f"{node.label}'s prefix")
        self.trusted(found, f"{node.label}'s {path}")
        self.check_machine(found, node.label)
        return str(found), {"env": str(self.path), "lock_sha256": self.lock_sha256, "spec": node.label}

    def trusted(self, path: Path, what: str, tree: bool = False) -> None:
        """`path` of the view (`tree`: and everything below it) as commstack.spack.trust checks the env: what a run
        loads from it could otherwise be another user's code."""
        (check_tree if tree else resolve_trusted)(path, f"env {self.path}: {what}")

    def check_libraries(self) -> None:
        """Every library of the view (lib and lib64 of its root and of each projection, each file where it
        resolves to) as trusted(): the files its binaries load through their RPATHs, and what a view on
        LD_LIBRARY_PATH would put first. An external's libraries are the system's, outside any view."""
        for top in sorted({self.view, *(Path(n.in_view) for n in self.nodes if n.in_view and n.installed)}):
            for sub in ("lib", "lib64"):
                if os.path.lexists(top / sub):
                    self.trusted(top / sub, f"its view's {sub}", tree=True)

    def check_machine(self, path: Path, label: str) -> None:
        """ForeignBinaryError where `path` (a file of spec `label`) is an ELF file for another machine."""
        machine, here = (elf_machine(path) if path.is_file() else None), platform.machine()
        if machine and machine != here:
            raise ForeignBinaryError(f"{path} of env {self.path} ({label}) is built for {machine}; this host is {here}")

    def mpi(self) -> Node | None:
        """The installed node that provides MPI (an external too: the system's MPI of the local env)."""
        return next((n for n in self.nodes if n.mpi and n.installed), None)


def load_env(path: Path) -> EnvView:
    """The env at `path`, checked to be usable here (docs/harness.md); read once per process
    (`commstack suite` checks it, then its pytest session uses it). Its files are checked first, every time
    (commstack.spack.trust): Spack imports the package code the env names."""
    check_env(path)
    return _load(path.resolve())


@functools.lru_cache(maxsize=8)
def _load(path: Path) -> EnvView:
    if not (path / "spack.yaml").is_file():
        raise EnvNotFoundError(f"--env {path}: not a Spack env (no spack.yaml); `spack env create -d {path}` makes one")
    if not (path / "spack.lock").is_file():
        raise EnvNotConcretizedError(f"env {path} was never concretized (no spack.lock): "
                                     f"`spack -e {path} concretize` then `spack -e {path} install`")
    exe = find_spack()
    if exe is None:
        raise SpackError(f"--env {path}: {NO_SPACK}")
    with tempfile.TemporaryDirectory(prefix="commstack-env-") as logs:  # a read's logs are not kept
        data = Spack(exe, Path(logs)).run_script("env_view", env_dir=path, timeout=600)
    nodes = tuple(Node(**n) for n in data["nodes"])
    if data["yaml_roots"] != data["lock_roots"]:
        raise StaleLockError(f"env {path}: its spack.lock differs from its spack.yaml (roots in spack.yaml: "
                             f"{', '.join(data['yaml_roots']) or 'none'}; in spack.lock: "
                             f"{', '.join(data['lock_roots']) or 'none'}): `spack -e {path} concretize -f` "
                             f"then `spack -e {path} install`")
    foreign = [n for n in nodes if not n.runs_here and not n.external]
    if foreign:
        host = data["host"]
        raise WrongHostError(f"env {path} is built for {foreign[0].target} ({foreign[0].family}: "
                             f"{', '.join(n.label for n in foreign[:3])}{' ...' if len(foreign) > 3 else ''}); "
                             f"this host is {host['target']} ({host['family']}): run it on a "
                             f"{foreign[0].family} node, or use an env concretized for this host")
    roots = [n for n in nodes if n.root]
    if not any(n.installed for n in roots):
        raise EnvNotInstalledError(f"env {path} is not installed (none of its {len(roots)} roots): "
                                   f"`spack -e {path} install`")
    if not data["view"] or not Path(data["view"]).is_dir():
        raise EnvNotInstalledError(f"env {path} has no view at {data['view']}: `spack -e {path} env view regenerate`"
                                   if data["view"] else
                                   f"env {path} has no view (view: false in its spack.yaml): add `view: true`")
    env = EnvView(path, hashlib.sha256((path / "spack.lock").read_bytes()).hexdigest(), Path(data["view"]), nodes)
    env.check_libraries()
    return env
