"""One screen of an allocation (docs/screen.md#one-allocation-no-job-per-node): its usable nodes, its phases
(docs/screen.md#phases), the verdict, and what it writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from commstack import benchmarks, exits
from commstack.config import Suite, System
from commstack.errors import BinaryNotFoundError, CommstackError, SlurmUnavailableError
from commstack.results import history
from commstack.results.records import Record
from commstack.results.references import references_of
from commstack.run.binaries import Binaries
from commstack.run.launch import Allocation, Launcher
from commstack.run.lifecycle import Lifecycle
from commstack.run.steps import SuiteStep, expand
from commstack.screen import matching, nodes as node_phase, output, verdict
from commstack.screen.pool import Context, Placed, Progress, run_all
from commstack.screen.spec import ScreenFile
from commstack.slurm.clients import STATE_FLAGS, client, node_states
from commstack.slurm.cluster import take_slurm

#: node states (sinfo %T, less its flags) a screen leaves out, reported
UNAVAILABLE = ("down", "drain", "drained", "draining", "fail", "failing", "maint", "future", "reserved",
               "power_down", "powered_down", "powering_down", "unknown", "not_responding")


@dataclass
class Outcome:
    nodes: list[str]
    findings: verdict.Findings
    not_run: dict[str, str]
    records: list[Record]
    report: Path | None = None
    interrupted: bool = False
    wall_s: float = 0.0
    phases_s: dict[str, float] = field(default_factory=dict)

    @property
    def exit(self) -> int:
        """FAILED: something bad or lost; NOT_RUN: nothing bad, but a check that ran could tell no slowdown."""
        f = self.findings
        return exits.FAILED if f.bad_nodes or f.bad_pairs or f.lost else exits.NOT_RUN if f.blind else exits.PASS


def unavailable_of(nodes: list[str], states: dict[str, tuple[str, str]]) -> dict[str, str]:
    """node -> `state (reason)` of those of `nodes` that a screen cannot use."""
    out = {}
    for n in nodes:
        state, reason = states.get(n, ("unknown", "not in sinfo"))
        if state.endswith("*") or any(state.rstrip(STATE_FLAGS).startswith(u) for u in UNAVAILABLE):
            out[n] = f"{state}" + (f" ({reason})" if reason and reason != "none" else "")
    return out


class Screen:
    def __init__(self, system: System, screen: ScreenFile, run_dir: Path, binaries: Binaries, slurm: str = "auto",
                 cluster_nodes: int | None = None, max_steps: int | None = None):
        self.system, self.screen, self.dir, self.binaries = system, screen, run_dir, binaries
        self.slurm, self.cluster_nodes = slurm, cluster_nodes
        self.max_steps = max_steps or screen.max_steps
        self.progress = Progress(0)
        self.cleanup = contextlib.ExitStack()
        self.records: list[Record] = []
        self.not_run: dict[str, str] = {}
        self.down: dict[str, str] = {}   # node -> its state, when the screen began
        self.lost: dict[str, str] = {}   # node -> its state, where it went down since
        self.phases_s: dict[str, float] = {}
        self.steps = Lifecycle(run_dir, system, references_of(system))
        self.slurm_variables: dict[str, str] = {}  # the Slurm it used: --drain --apply asks the same one

    def allocate(self, variables: dict[str, str]) -> tuple[Launcher, list[str]]:
        """The allocation's usable nodes and a launcher in it; the others are self.down, with the reason."""
        job = variables.get("SLURM_JOB_ID")
        states = node_states(variables, self.system.partition)
        if job:
            alloc = Allocation(self.system, variables, 0, 0).__enter__()
            candidates = alloc.hosts
        else:
            candidates = sorted(states, key=_natural)
        self.down = unavailable_of(candidates, states)
        up = [n for n in candidates if n not in self.down]
        if not up:
            raise SlurmUnavailableError(f"no node to screen: {'; '.join(f'{n} {s}' for n, s in self.down.items())}")
        if not job:
            flags = [*self.system.launcher.salloc_flags, "--no-kill", f"--nodelist={','.join(up)}"]
            system = self.system.model_copy(update={"launcher": self.system.launcher.model_copy(
                update={"salloc_flags": flags})})
            alloc = self.cleanup.enter_context(Allocation(system, variables, nodes=len(up), ntasks=2 * len(up)))
        return Launcher(self.system, "srun", slurm_variables=variables, allocation=alloc), up

    def checks(self, steps: list, nodes: int, phase: str) -> tuple[list[SuiteStep], dict[str, dict[str, str]]]:
        """A phase's checks expanded for a placement of `nodes` nodes, with their binaries; one whose binary
        cannot be had is kept, not-run with the reason."""
        suite = Suite(name=f"screen-{phase}", steps=steps)
        out, paths = [], {}
        for s in expand(suite, self.system.model_copy(update={"nodes": nodes})):
            # the check's name: its base (id, or benchmark and mode), then memory and environment unless plain
            check = "-".join([s.base] + (["device"] if s.tags["memory"] == "device" else [])
                             + ([s.tags["environment"]] if s.tags["environment"] != "native" else []))
            s = dataclasses.replace(s, id=check)
            if not s.not_run:
                try:
                    paths[check] = self.binaries.resolve(s)
                except BinaryNotFoundError as e:
                    s.not_run = str(e)
            out.append(s)
        return out, paths

    def phase(self, ctx: Context, name: str, placed: list[Placed], at_once: int | None = None) -> list[Record]:
        t0 = time.monotonic()
        try:
            recs = run_all(ctx, placed, name, min(self.max_steps, at_once or self.max_steps), self.progress,
                           len(self.records))
        except KeyboardInterrupt as e:
            self.records += getattr(e, "partial", [])
            raise
        finally:
            self.phases_s[name] = self.phases_s.get(name, 0.0) + time.monotonic() - t0
        self.records += recs
        return recs

    def run(self) -> Outcome:
        t0 = time.monotonic()
        up: list[str] = []
        facts: dict[str, dict] = {}
        interrupted = False
        try:
            self.slurm_variables = take_slurm(self.system.name, self.slurm, self.cleanup,
                                              self.cluster_nodes or self.system.nodes, "a screen runs srun steps",
                                              heal=False)  # a drained node is reported, not resumed
            launcher, up = self.allocate(self.slurm_variables)
            self.progress.total = len(up)
            node_checks, paths = self.checks(self.screen.per_node, 1, "per-node") if self.screen.per_node else ([], {})
            pair_checks, pair_paths = self.checks(self.screen.pairs.checks, 2, "pairs") if self.screen.pairs \
                else ([], {})
            ctx = Context(self.steps, launcher, facts, {**paths, **pair_paths})
            t1 = time.monotonic()
            found, why = node_phase.probe(ctx, up, node_phase.probe_binary(ctx, node_checks + pair_checks))
            facts.update(found)
            self.phases_s["facts"] = time.monotonic() - t1
            if why:
                self.not_run["facts"] = why
            if node_checks:
                self.phase(ctx, "per-node", node_phase.placed(node_checks, up, facts), self.screen.per_node_at_once)
            if self.screen.pairs:
                self.pairs(ctx, up, pair_checks)
            if self.screen.groups:
                self.groups(ctx, [n for n in up if n not in self.went_down(up)])
            self.went_down(up)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            self.cleanup.close()
        self.skipped(self.records)
        findings = self.findings(up, facts)
        return Outcome(up + list(self.down), findings, self.not_run, self.records, interrupted=interrupted,
                       wall_s=time.monotonic() - t0, phases_s=self.phases_s)

    def went_down(self, up: list[str]) -> dict[str, str]:
        """The nodes of `up` that sinfo finds down, drained or not responding now (self.lost)."""
        self.lost = unavailable_of(up, node_states(self.slurm_variables, self.system.partition))
        return self.lost

    def skipped(self, recs: list[Record]) -> None:
        """Checks of any phase not run on some nodes (no GPUs there, no binary: osu_bw without OSU), once per
        check and reason: the screen judges on the checks that ran, and says which did not."""
        why: dict[tuple[str, str], set[str]] = {}
        for r in recs:
            if r.verdict == "not-run" and not r.reason.startswith("interrupted"):
                why.setdefault((verdict.check_of(r), r.reason), set()).update(r.nodelist)
        for (check, reason), where in why.items():
            self.not_run[check] = f"{reason} ({len(where)} node{'s' if len(where) > 1 else ''})"

    def pairs(self, ctx: Context, up: list[str], checks: list[SuiteStep]) -> None:
        if len(up) < 2:
            self.not_run["pairs"] = f"one node in the allocation ({up[0]}): a pair check needs two"
            return
        p = self.screen.pairs
        rounds = matching.rounds_for(up, p.rounds, p.matching, p.seed, p.all_pairs_up_to)
        self.phase(ctx, "pairs", [x for r, rnd in enumerate(rounds) for pr in rnd for x in both_ways(checks, pr, r + 1)],
                   p.at_once)
        if not p.confirm:
            return
        f = self.findings(up, ctx.facts)
        again = matching.confirm(verdict.suspects(f), verdict.good(f), matching.partners(rounds))
        if again:
            n = len(rounds) + 1
            self.phase(ctx, "confirm", [x for pr in again for x in both_ways(checks, pr, n)], p.at_once)

    def groups(self, ctx: Context, up: list[str]) -> None:
        """osu_mbw_mr (or the screen's group checks) within each leaf switch of `scontrol show topology`."""
        out = client(["scontrol", "show", "topology"], ctx.launcher.variables)
        if not out.stdout.strip():  # Slurm 22.05 without topology/tree: "scontrol: error: No topology ..." on stderr
            self.not_run["groups"] = f"no leaf switches: {out.stderr.strip() or 'scontrol show topology lists none'}"
            return

        def expand_hosts(hostlist: str) -> list[str]:
            return client(["scontrol", "show", "hostnames", hostlist], ctx.launcher.variables).stdout.split()
        try:
            leaves = matching.leaf_switches(out.stdout if out.returncode == 0 else "", expand_hosts)
        except ValueError as e:
            self.not_run["groups"] = str(e)
            return
        groups = {sw: [n for n in members if n in up] for sw, members in leaves.items()}
        groups = {sw: members for sw, members in groups.items() if len(members) >= 2}
        if not groups:
            self.not_run["groups"] = "no leaf switch with 2 nodes or more in the allocation (scontrol show topology)"
            return
        placed = []
        for sw, members in groups.items():
            checks, paths = self.checks(self.screen.groups.checks, len(members), f"group-{sw}")
            ctx.binaries.update(paths)
            placed += [Placed(s, tuple(members), f"switch {sw}") for s in checks]
        self.phase(ctx, "groups", placed)

    def findings(self, up: list[str], facts: dict[str, dict]) -> verdict.Findings:
        by_phase = lambda ph: [r for r in self.records if r.tags.get("screen_phase") == ph]  # noqa: E731
        return verdict.attribute(up + list(self.down), self.down, by_phase("per-node"), by_phase("pairs"),
                                 node_phase.problems(self.system, facts), self.screen.rule, self.lost)

    def write(self, outcome: Outcome, history_path: Path | None) -> None:
        doc = {"run_id": self.dir.name, "system": self.system.name, "screen": self.screen.name,
               "wall_s": outcome.wall_s, "phases_s": outcome.phases_s, "exit": outcome.exit,
               "interrupted": outcome.interrupted, "max_steps": self.max_steps,
               "steps": len(outcome.records)}
        outcome.report = output.write(self.dir, doc, outcome.nodes, outcome.findings, outcome.records,
                                      outcome.not_run)
        if outcome.records:
            try:
                history.add_run(self.dir, history_path)
            except CommstackError as e:
                outcome.not_run["history"] = str(e)


def both_ways(checks: list[SuiteStep], nodes: tuple[str, str], round_: int) -> list[Placed]:
    """A pair's checks: a one-way check (its benchmark's `sender`) from each node to the other, a round trip
    once."""
    a, b = nodes
    return [Placed(s, hosts, "pairs", round_) for s in checks
            for hosts in ([(a, b), (b, a)] if benchmarks.get(s.benchmark).sender is not None else [(a, b)])]


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))
