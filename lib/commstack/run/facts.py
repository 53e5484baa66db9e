"""Stack facts kept with each result: which MPI a binary runs on and what it can do, what the
nodes have. Asked of the binary's own libraries (ldd) and the MPI's own query tool."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

NCCL_NET = re.compile(r"NCCL INFO (?:NET/Plugin.*|Using network \S+.*|NET/\S+ : Using .*)")


def _run(argv: list[str], timeout: int = 60) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


@functools.cache
def mpi_facts(binary: str) -> dict:
    """MPI library, version and CUDA support of the MPI `binary` is linked with; asked once per binary."""
    libmpi = next((m.group(1) for m in re.finditer(r"libmpi\.so[.\d]* => (\S+)", _run(["ldd", binary]))), None)
    return {"libmpi": libmpi, **(_mpi_library(libmpi) if libmpi else {})}


@functools.cache
def _mpi_library(libmpi: str) -> dict:
    """What an MPI library says of itself; asked once per library (ompi_info --all takes a quarter second)."""
    prefix = Path(libmpi).resolve().parent.parent
    ompi_info = prefix / "bin" / "ompi_info"
    ompi_info = str(ompi_info) if ompi_info.is_file() else shutil.which("ompi_info")
    text = _run([ompi_info, "--parsable", "--all"]) if ompi_info else ""
    version = re.search(r"^ompi:version:full:(\S+)$", text, re.M)
    if version:
        cuda = re.search(r"(?:mpi|opal)_built_with_cuda_support:value:(\w+)", text)
        comps = sorted(set(re.findall(r'^mca:((?:btl|mtl|pml|osc):\w+):version:"component', text, re.M)))
        return dict(mpi_library="Open MPI", mpi_version=version.group(1),
                    cuda_aware=cuda.group(1) == "true" if cuda else None, components=comps)
    if "cray" in libmpi or "mpich" in libmpi:
        return dict(mpi_library="MPICH (Cray MPICH)" if "cray" in libmpi else "MPICH",
                    mpi_version=Path(libmpi).resolve().name)
    return {}


@functools.cache
def node_facts() -> dict:
    """GPUs and NICs of the node running the harness (the nodes of a run are recorded per step); asked once."""
    gpus = [line for line in _run(["nvidia-smi", "-L"]).splitlines() if line.startswith("GPU")] \
        if shutil.which("nvidia-smi") else []
    nics = sorted(p.name for p in Path("/sys/class/net").glob("*") if p.name != "lo")
    cxi = sorted(p.name for p in Path("/sys/class/cxi").glob("*"))
    providers = sorted(set(re.findall(r"^provider: (\S+)", _run(["fi_info", "-l"]), re.M))) \
        if shutil.which("fi_info") else []
    return {"gpus": gpus, "nics": nics, "cxi_devices": cxi, "libfabric_providers": providers}


def nccl_net(text: str) -> list[str]:
    """The network NCCL selected, from its NCCL_DEBUG=INFO lines (plugin loaded or not)."""
    return sorted({m.group(0) for m in NCCL_NET.finditer(text)})
