"""Phase 1, per node: the facts (run.facts's probe, one step over every node), then the one-node checks, each
node's at once (docs/screen.md#phases).
"""

from __future__ import annotations

import shutil

from commstack import benchmarks
from commstack.config import System
from commstack.errors import CommstackError, ParseError
from commstack.files import make_dirs
from commstack.run.facts import lower_layer_problem, parse_probe, probe_argv
from commstack.run.launch import Step
from commstack.run.steps import SuiteStep
from commstack.screen.pool import Context, Placed


def probe(ctx: Context, nodes: list[str], binary: str) -> tuple[dict[str, dict], str | None]:
    """Every node's stack facts from one probe step over all of them; what a node that did not answer leaves
    out is missing, with the reason (the probe's error) returned."""
    outdir = make_dirs(ctx.steps.dir, "facts")
    step = Step(name="screen-facts", argv=probe_argv(binary), nodes=len(nodes), ntasks=len(nodes),
                ntasks_per_node=1, timeout_s=120, probe=True, hosts=list(nodes))
    error = None
    try:
        text = ctx.launcher.run(step, outdir).stdout
    except CommstackError as e:  # a node that hangs or fails: the others' lines are in stdout.txt all the same
        error = f"{e.kind}: {e}"
        text = (outdir / "stdout.txt").read_bytes().decode(errors="replace") if (outdir / "stdout.txt").exists() else ""
    try:
        facts = parse_probe(text)["nodes"]
    except ParseError as e:
        return {}, f"the facts probe printed a line it should not: {e}"
    missing = [n for n in nodes if n not in facts]
    if missing and not error:
        error = f"no facts from {', '.join(missing)}"
    return facts, error


def problems(system: System, facts: dict[str, dict]) -> dict[str, str]:
    """Per node, the layer its facts show missing: the system's libfabric provider, a UCX transport."""
    fabric = system.fabric
    found = {node: [p for layer in ("fabric", "ucx")
                    if fabric and (p := lower_layer_problem(layer, fabric.provider, fabric.ucx_transports, {node: f}))]
             for node, f in facts.items()}
    return {node: "; ".join(ps) for node, ps in found.items() if ps}


def needs_gpus(s: SuiteStep) -> bool:
    return s.step.gpus or benchmarks.get(s.benchmark).tool.gpus


def placed(checks: list[SuiteStep], nodes: list[str], facts: dict[str, dict]) -> list[Placed]:
    """Every one-node check on every node; one that needs GPUs is not-run on a node whose facts list none."""
    return [Placed(s, (n,), "per-node", 0, f"{s.id} needs GPUs; {n} has none (nvidia-smi -L lists none)"
                   if needs_gpus(s) and n in facts and not facts[n].get("gpus") else None)
            for s in checks for n in nodes]


def probe_binary(ctx: Context, checks: list[SuiteStep]) -> str:
    """The binary whose MPI the probe reports: the first check's, else any program the node has."""
    for s in checks:
        argv = s.step.argv
        head = argv[0].partition("/")[0] if argv else ""
        path = ctx.binaries.get(s.id, {}).get(head)
        if path:
            return path + argv[0][len(head):]
    return shutil.which("true") or "true"
