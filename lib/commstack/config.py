"""Systems are data: systems/<name>.yaml. This module loads and checks them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from commstack.errors import ConfigError, UnknownSystemError

from commstack.paths import SYSTEMS as SYSTEMS_DIR
MPI_PLUGINS = ("pmix", "pmi2", "cray_shasta", "none")
GPU_BINDINGS = ("none", "localid", "gpus-per-task")


@dataclass
class System:
    name: str
    description: str
    nodes: int
    cores_per_node: int
    gpus_per_node: int
    nics_per_node: int
    nic_line_rate_MBps: float | None
    mpi: str = "pmix"
    gpu_binding: str = "none"
    srun_flags: list[str] = field(default_factory=list)
    salloc_flags: list[str] = field(default_factory=list)
    mpirun_flags: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    partition: str | None = None
    references: Path | None = None
    path: Path | None = None


def known_systems() -> list[str]:
    return sorted(p.stem for p in SYSTEMS_DIR.glob("*.yaml"))


def load_system(name_or_path: str) -> System:
    path = Path(name_or_path)
    if not path.suffix:
        path = SYSTEMS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise UnknownSystemError(f"unknown system {name_or_path!r}; known: {', '.join(known_systems())}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    return _build(data, path)


def _build(data: Any, path: Path) -> System:
    def need(d: dict, key: str, kind: type | tuple, where: str) -> Any:
        if key not in d:
            raise ConfigError(f"{path}: {where}{key} is missing")
        if not isinstance(d[key], kind):
            raise ConfigError(f"{path}: {where}{key} must be {getattr(kind, '__name__', kind)}, got {d[key]!r}")
        return d[key]

    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a system file is a mapping")
    known = {"name", "description", "partition", "nodes", "node", "launcher", "env", "references"}
    extra = set(data) - known
    if extra:
        raise ConfigError(f"{path}: unknown keys {sorted(extra)}; allowed: {sorted(known)}")
    node = need(data, "node", dict, "")
    launcher = need(data, "launcher", dict, "")
    cores = node.get("cores", "auto")
    if cores == "auto":
        cores = os.cpu_count() or 1
    mpi = launcher.get("mpi", "pmix")
    if mpi not in MPI_PLUGINS:
        raise ConfigError(f"{path}: launcher.mpi {mpi!r} is not one of {MPI_PLUGINS}")
    binding = launcher.get("gpu_binding", "none")
    if binding not in GPU_BINDINGS:
        raise ConfigError(f"{path}: launcher.gpu_binding {binding!r} is not one of {GPU_BINDINGS}")
    refs = data.get("references")
    return System(
        name=need(data, "name", str, ""),
        description=data.get("description", ""),
        nodes=need(data, "nodes", int, ""),
        cores_per_node=int(cores),
        gpus_per_node=need(node, "gpus", int, "node."),
        nics_per_node=need(node, "nics", int, "node."),
        nic_line_rate_MBps=node.get("nic_line_rate_MBps"),
        mpi=mpi,
        gpu_binding=binding,
        srun_flags=[str(f) for f in launcher.get("srun_flags", [])],
        salloc_flags=[str(f) for f in launcher.get("salloc_flags", [])],
        mpirun_flags=[str(f) for f in launcher.get("mpirun_flags", [])],
        env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
        partition=data.get("partition"),
        references=(path.parent / refs).resolve() if refs else None,
        path=path,
    )
