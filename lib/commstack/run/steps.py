"""A suite expanded for a system into concrete job steps (what the dry run prints and what a run launches), by
the suite's placement rules (docs/harness.md#suites-reports-and-compare); a step the system cannot run is kept,
with the reason.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from commstack import benchmarks
from commstack.config import StepSpec, Suite, System
from commstack.run.launch import Step
from commstack.tools import Program


@dataclass
class SuiteStep:
    id: str
    benchmark: str
    tool: str                     # its tool's name (commstack.tools)
    step: Step
    tags: dict[str, Any] = field(default_factory=dict)
    repeats: int = 1
    not_run: str | None = None    # why this system cannot run the step (no GPU, too few nodes)
    require_validation: bool = False  # the suite or the system: a step without a data check fails
    #: the id up to the placement: the suite step's name (its id, else its benchmark) and mode
    base: str = ""

    @property
    def dirname(self) -> str:
        """Where its record and raw output go, steps/<dirname> (the record's Record.dirname)."""
        return f"{self.tags['suite']}--{self.id}"

    @property
    def metric(self) -> str:
        return benchmarks.get(self.benchmark).metric


def _per_node(value: Any, system: System) -> tuple[int | None, str | None]:
    """Ranks per node, or None and why the system cannot give them."""
    counts = {"nic": system.node.nics, "core": system.cores_per_node, "gpu": system.node.gpus}
    n = counts.get(value, value)
    if n < 1:
        return None, f"ranks_per_node {value}: system {system.name} has {n} {value}s per node"
    return n, None


def expand(suite: Suite, system: System, binaries: dict[str, str] | None = None,
           memory_only: str | None = None, native_only: bool = False) -> list[SuiteStep]:
    """Every concrete step of `suite` on `system`, in suite order, `not_run` saying why where the system cannot run
    it. `binaries`: tool name -> prefix or path (native runs); where one is missing the dry run shows the
    tool's placeholder ($OSU_MPI, ...) instead. `memory_only`: keep the steps in that memory;
    `native_only`: drop the container runs (a system without a container engine)."""
    binaries = binaries or {}
    out: list[SuiteStep] = []
    for spec in suite.steps:
        bench = spec.benchmark
        b = benchmarks.get(bench)
        tool = b.tool
        memories = [m for m in spec.memory if not memory_only or m == memory_only]
        envs = [e for e in spec.environments if not native_only or e == "native"]
        counts: list = spec.node_counts or [spec.nodes]
        if isinstance(counts, dict):  # {max: M}: 2, 4, ... up to M or the system's size
            top = min(counts["max"], system.nodes)
            counts = [2 ** k for k in range(1, top.bit_length()) if 2 ** k <= top]
        modes = (spec.mode or [tool.modes[0]]) if tool.modes else [None]
        names = set()  # a GPU mode makes host memory device memory: that step once
        for memory, environment, nodes, mode in itertools.product(memories, envs, counts, modes):
            if mode in ("staged", "cuda-aware"):
                memory = "device"  # the ping-pong's GPU modes
            n_nodes = system.nodes if nodes == "all" else nodes
            rpn, why = _per_node(spec.ranks_per_node, system)
            if why is None and n_nodes > system.nodes:
                why = f"needs {n_nodes} nodes, system {system.name} has {system.nodes}"
            if why is None and (memory == "device" or tool.gpus) and system.node.gpus < 1:
                why = (f"device memory needs GPUs, system {system.name} has none" if memory == "device" else
                       f"{tool.name} runs on GPUs only, system {system.name} has none")
            if why is None and spec.ranks_per_node == "gpu" and rpn > system.node.gpus:
                why = f"{rpn} GPUs per node needed, system {system.name} has {system.node.gpus}"
            rpn = rpn or 1
            ntasks = n_nodes * rpn
            odd = spec.odd and ntasks % 2 == 0
            if odd:
                ntasks -= 1  # seed 004: an odd count defeats pairwise shortcuts in alltoall
                if why is None and ntasks < n_nodes:
                    why = (f"an odd rank count on {n_nodes} nodes x {rpn} would leave {ntasks} ranks, "
                           "fewer than the nodes")
            if why is None and ntasks < b.min_ranks:
                why = (f"{ntasks} rank{'s' if ntasks > 1 else ''} on {n_nodes} node{'s' if n_nodes > 1 else ''}: "
                       f"{bench} needs at least {b.min_ranks}")
            argv = _program(b, spec, memory, environment, binaries, mode, suite.device_args, system)
            base = "-".join(p for p in (spec.name, mode) if p)
            name = "-".join(str(p) for p in (base, f"N{n_nodes}", f"n{ntasks}", memory, environment) if p)
            if name in names:
                continue
            names.add(name)
            step = Step(name=name, argv=argv, nodes=n_nodes, ntasks=ntasks,
                        ntasks_per_node=None if odd else rpn, timeout_s=spec.timeout_s,
                        environment=None if environment == "native" else environment,
                        gpus=memory == "device" or tool.gpus)
            tags = {"benchmark": bench, "nodes": n_nodes, "ntasks": ntasks, "ranks_per_node": rpn,
                    "memory": memory, "environment": environment, "suite": suite.name,
                    # what the references select on (systems/references): the CE hooks in use
                    "cxi_hook": not environment.endswith("no-cxi")}
            tags.update(tool.tags(environment))
            if mode:
                tags["mode"] = mode
            out.append(SuiteStep(name, bench, tool.name, step, tags, spec.repeats, why,
                                 suite.require_validation or system.require_validation, base))
    return out


def _program(b: benchmarks.Benchmark, spec: StepSpec, memory: str, environment: str, binaries: dict,
             mode: str | None, device_args: dict[str, list[str]], system: System) -> list[str]:
    size_args = b.sizes.args(*spec.sizes) if spec.sizes else []
    return b.tool.program(b, Program(spec.argv, size_args, memory, environment != "native",
                                     binaries.get(b.tool.name, b.tool.placeholder), mode, device_args,
                                     system.fabric.provider if system.fabric else None))
