"""Suites are data: suites/<name>.yaml. This module expands a suite for a system into
concrete job steps (what the dry run prints and what the slurm tier runs).

Placement rules are the suite's, not the user's: `ranks_per_node` may be a number or `nic`,
`core`, `gpu` (per node, from the system file); `nodes: all` is the whole system; `odd: true`
makes the total rank count odd (nodes x ranks_per_node - 1 when that product is even, seed 004).
A suite asking for more than the system has is refused before anything is submitted.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from commstack import benchmarks
from commstack.errors import ConfigError
from commstack.run.launch import Step
from commstack.config import System

from commstack.paths import SUITES as SUITES_DIR

#: where the images put things (containers/templates: the view, and osu-mb's WORKDIR)
IMAGE_VIEW = "/opt/view"

STEP_KEYS = {"benchmark", "sizes", "nodes", "ranks_per_node", "odd", "memory", "environments", "args",
             "repeats", "node_counts", "timeout_s", "mode", "id"}


class SuiteError(ConfigError):
    """A suite that is malformed, or asks for more than the system has."""


@dataclass
class SuiteStep:
    id: str
    benchmark: str
    tool: str                     # osu | mpi-pingpong | nccl-tests
    step: Step
    tags: dict[str, Any] = field(default_factory=dict)
    repeats: int = 1

    @property
    def metric(self) -> str:
        return benchmarks.get(self.benchmark).metric


@dataclass
class Suite:
    name: str
    description: str
    steps: list[dict]
    path: Path
    device_args: dict[str, list[str]] = field(default_factory=dict)  # the suite's, by OSU directory


def known_suites() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))


def load_suite(name: str) -> Suite:
    path = SUITES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise SuiteError(f"unknown suite {name!r}; known: {', '.join(known_suites())}")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list) or not data["steps"]:
        raise SuiteError(f"{path}: a suite is a mapping with a non-empty `steps:` list")
    for i, s in enumerate(data["steps"]):
        extra = set(s) - STEP_KEYS
        if extra or "benchmark" not in s:
            raise SuiteError(f"{path}: step {i + 1}: " + (f"unknown keys {sorted(extra)}" if extra else "no benchmark"))
    device = {k: [str(a) for a in v] for k, v in (data.get("device_args") or {}).items()}
    return Suite(data.get("name", name), data.get("description", ""), data["steps"], path, device)


def _tool(benchmark: str) -> str:
    if benchmark not in benchmarks.BENCHMARKS:
        raise SuiteError(f"unknown benchmark {benchmark!r}")
    return benchmarks.BENCHMARKS[benchmark].tool


def _per_node(value: Any, system: System, where: str) -> int:
    counts = {"nic": system.nics_per_node, "core": system.cores_per_node, "gpu": system.gpus_per_node}
    n = counts[value] if value in counts else value
    if not isinstance(n, int) or n < 1:
        have = f"; system {system.name} has {n} per node" if value in counts else ""
        raise SuiteError(f"{where}: ranks_per_node {value!r} gives no ranks{have}")
    return n


def expand(suite: Suite, system: System, binaries: dict[str, str] | None = None,
           memory_only: str | None = None, native_only: bool = False) -> list[SuiteStep]:
    """Every concrete step of `suite` on `system`. `binaries`: tool -> prefix or path (native runs);
    where one is missing the dry run shows $OSU_MPI, $PINGPONG or $NCCL_TESTS instead.
    `memory_only`: keep the steps in that memory (host: the suite scaled down to a CPU system);
    `native_only`: drop the container runs (a system without a container engine)."""
    binaries = binaries or {}
    out: list[SuiteStep] = []
    for raw in suite.steps:
        bench = raw["benchmark"]
        tool = _tool(bench)
        memories = raw.get("memory", ["host"])
        memories = [memories] if isinstance(memories, str) else memories
        if memory_only:
            memories = [m for m in memories if m == memory_only]
        envs = raw.get("environments", ["native"])
        if native_only:
            envs = [e for e in envs if e == "native"]
        counts = raw.get("node_counts", [raw.get("nodes", 1)])
        if isinstance(counts, dict):  # {max: M}: 2, 4, ... up to M or the system's size
            top = min(int(counts["max"]), system.nodes)
            counts = [2 ** k for k in range(1, top.bit_length()) if 2 ** k <= top]
        modes = raw.get("mode", ["cpu"]) if tool == "mpi-pingpong" else [None]
        modes = [modes] if isinstance(modes, str) else modes
        for memory, environment, nodes, mode in itertools.product(memories, envs, counts, modes):
            if mode in ("staged", "cuda-aware"):
                memory = "device"  # the ping-pong's GPU modes
            where = f"suite {suite.name}, {bench}"
            n_nodes = system.nodes if nodes == "all" else nodes
            if not isinstance(n_nodes, int) or n_nodes < 1:
                raise SuiteError(f"{where}: nodes {nodes!r} is not a count")
            if n_nodes > system.nodes:
                raise SuiteError(f"{where}: needs {n_nodes} nodes, system {system.name} has {system.nodes}")
            if memory == "device" and system.gpus_per_node < 1:
                raise SuiteError(f"{where}: device memory needs GPUs, system {system.name} has "
                                 f"{system.gpus_per_node} per node")
            rpn = _per_node(raw.get("ranks_per_node", 1), system, where)
            if raw.get("ranks_per_node") == "gpu" and rpn > system.gpus_per_node:
                raise SuiteError(f"{where}: {rpn} GPUs per node needed, system has {system.gpus_per_node}")
            ntasks = n_nodes * rpn
            odd = raw.get("odd", False) and ntasks % 2 == 0
            if odd:
                ntasks -= 1  # seed 004: an odd count defeats pairwise shortcuts in alltoall
                if ntasks < n_nodes:
                    raise SuiteError(f"{where}: an odd rank count on {n_nodes} nodes x {rpn} would leave "
                                     f"{ntasks} ranks, fewer than the nodes; use more nodes or NICs per node")
            argv = _program(tool, bench, raw, memory, environment, binaries, mode, suite.device_args)
            step = Step(name="", argv=argv, nodes=n_nodes, ntasks=ntasks,
                        ntasks_per_node=None if odd else rpn, timeout_s=int(raw.get("timeout_s", 600)),
                        environment=None if environment == "native" else environment,
                        gpus=memory == "device" or tool == "nccl-tests")
            parts = [raw.get("id", bench), mode, f"N{n_nodes}", f"n{ntasks}", memory, environment]
            step.name = "-".join(str(p) for p in parts if p)
            tags = {"benchmark": bench, "nodes": n_nodes, "ntasks": ntasks, "ranks_per_node": rpn,
                    "memory": memory, "environment": environment, "suite": suite.name,
                    # what the references select on (systems/references): the CE hooks in use
                    "cxi_hook": not environment.endswith("no-cxi")}
            if tool == "nccl-tests":
                tags["aws_ofi_nccl_hook"] = not environment.endswith("no-awsofinccl")
            if mode:
                tags["mode"] = mode
            out.append(SuiteStep(step.name, bench, tool, step, tags, int(raw.get("repeats", 1))))
    return out


def _program(tool: str, bench: str, raw: dict, memory: str, environment: str, binaries: dict,
             mode: str | None, device_args: dict[str, list[str]]) -> list[str]:
    container = environment != "native"
    args = [str(a) for a in raw.get("args", [])]
    sizes = raw.get("sizes")
    b = benchmarks.get(bench)
    size_args = b.sizes.args(*sizes) if sizes else []
    if tool == "osu":
        exe = (f"./{b.directory}/{bench}" if container  # the osu-mb image's WORKDIR
               else f"{binaries.get('osu', '$OSU_MPI')}/{b.directory}/{bench}")
        if memory == "device":
            return [exe, *args, *size_args, *device_args.get(b.directory, b.device_args)]
        return [exe, *args, *size_args]
    if tool == "mpi-pingpong":
        exe = f"{IMAGE_VIEW}/bin/mpi-pingpong" if container else binaries.get("mpi-pingpong", "$PINGPONG")
        return [exe, "-m", mode, *size_args, *args]
    exe = f"{IMAGE_VIEW}/bin/{bench}" if container else f"{binaries.get('nccl-tests', '$NCCL_TESTS')}/bin/{bench}"
    return [exe, *size_args, *args]
