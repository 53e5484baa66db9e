"""`commstack screen --plan --nodes N`: what a screen of N nodes takes, on paper, per phase, from the per-step costs
measured here (perf/screen-costs.yaml) and the benchmark's own time at the system's reference figures
(docs/screen.md#planning-a-large-screen).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import yaml

from commstack import benchmarks
from commstack.config import StepSpec, System
from commstack.errors import ConfigError
from commstack.paths import TOP
from commstack.results.references import references_of
from commstack.screen import matching
from commstack.screen.spec import ScreenFile
from commstack.tools.base import byte_count

COSTS = TOP / "perf" / "screen-costs.yaml"
OSU_WINDOW = 64  # osu_bw's messages in flight per iteration (its default -W)


@dataclass
class Costs:
    step_s: float          # one srun step's fixed cost: launch, MPI_Init, end
    steps_per_s: float     # steps the controller started per second
    measured: str          # where and when


def costs() -> Costs:
    try:
        doc = yaml.safe_load(COSTS.read_text())
        return Costs(float(doc["step_s"]), float(doc["steps_per_s"]), str(doc["measured"]))
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError) as e:
        raise ConfigError(f"{COSTS}: per-step costs not readable ({e}); run perf/screen.py --record") from None


def _flag(args: list[str], flag: str, default: int) -> int:
    return int(args[args.index(flag) + 1]) if flag in args and args.index(flag) + 1 < len(args) else default


def _sizes(spec: StepSpec) -> list[int]:
    if not spec.sizes:
        return [1 << 20]
    lo, hi = (max(1, byte_count(str(s))) for s in spec.sizes)
    return [1 << k for k in range(lo.bit_length() - 1, hi.bit_length())]


def bench_s(spec: StepSpec, bandwidth_Bps: float, latency_s: float) -> float:
    """The benchmark's own time on the target: its bytes at the reference bandwidth, its round trips at the
    reference latency."""
    args = spec.argv
    if spec.benchmark == "fi_pingpong":
        given = args[args.index("-S") + 1:args.index("-S") + 2] if "-S" in args else []
        size = int(given[0]) if given and given[0] != "all" else 6 << 20   # -S all, or none: up to 6 MiB
        iters = _flag(args, "-I", 1000)
        return iters * (2 * size / bandwidth_Bps + 2 * latency_s)
    iters, warm = _flag(args, "-i", 1000), _flag(args, "-x", 100)
    window = _flag(args, "-W", OSU_WINDOW) if spec.benchmark in ("osu_bw", "osu_bibw", "osu_mbw_mr") else 1
    return sum((iters + warm) * (window * s / bandwidth_Bps + 2 * latency_s) for s in _sizes(spec))


def figures(system: System) -> tuple[float, float, str]:
    """The target's inter-node bandwidth (B/s, osu_bw's largest reference size) and latency (s, osu_latency's
    smallest), from its references; where it has none, 1 GB/s and 10 us, said so."""
    refs = references_of(system)
    bw = refs.find("osu_bw", {"memory": "host", "nodes": 2, "cxi_hook": True}) if refs else None
    lat = refs.find("osu_latency", {"memory": "host", "nodes": 2, "cxi_hook": True}) if refs else None
    if not bw or not lat:
        return 1e9, 10e-6, f"{system.name} has no osu_bw/osu_latency references: assumed 1 GB/s and 10 us"
    b, l_ = bw.points[max(bw.points)] * 1e6, lat.points[min(lat.points)] * 1e-6
    return b, l_, f"{system.name} references {bw.id} ({b / 1e9:.1f} GB/s) and {lat.id} ({l_ * 1e6:.2f} us)"


def plan(screen: ScreenFile, system: System, n: int, max_steps: int | None = None) -> tuple[list[list[str]], str]:
    """Rows (phase, rounds, srun steps, at once, expected s, bound by) and what the figures come from."""
    c = costs()
    bw, lat, source = figures(system)
    at_once = max_steps or screen.max_steps
    rows = [["facts", "1", "1", "1", f"{c.step_s:.0f}", "one step over every node"]]
    total_steps, total_s = 1, c.step_s

    def phase(name: str, rounds: int, placements: int, specs: list[StepSpec], limit: int = at_once) -> None:
        nonlocal total_steps, total_s
        steps = rounds * placements * len(specs)
        waves = math.ceil(placements / limit)
        running = sum(waves * (c.step_s + bench_s(s, bw, lat)) for s in specs)
        paced = placements * len(specs) / c.steps_per_s  # the controller starts no more than steps_per_s
        per_round = max(running, paced)
        total_steps, total_s = total_steps + steps, total_s + rounds * per_round
        rows.append([name, str(rounds), str(steps), str(min(placements, limit)), f"{rounds * per_round:.0f}",
                     "the controller" if paced > running else "the steps"])

    if screen.per_node:
        phase("per node", 1, n, screen.per_node, min(at_once, screen.per_node_at_once or at_once))
    if screen.pairs and n >= 2:
        p = screen.pairs
        rounds = len(matching.rounds_for([f"n{i}" for i in range(n)], p.rounds, p.matching, p.seed, p.all_pairs_up_to))
        both_ways = [s for s in p.checks for _ in range(1 if benchmarks.get(s.benchmark).sender is None else 2)]
        phase("pairs" + (" (all pairs)" if n <= p.all_pairs_up_to else f" ({p.matching})"), rounds, n // 2,
              both_ways, min(at_once, p.at_once or at_once))
    if screen.groups:
        rows.append(["groups", "", "1 per leaf switch", "", "", "not planned: the switches come from scontrol"])
    rows.append(["total", "", str(total_steps), "", f"{total_s:.0f}", ""])
    return rows, (f"per step {c.step_s:.2f} s fixed, {c.steps_per_s:.1f} steps/s started ({c.measured}); "
                  f"benchmark times at {source}")
