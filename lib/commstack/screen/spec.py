"""Screen files: screens/<name>.yaml, read through commstack.config as a suite is; a screen's checks are suite steps
(config.StepSpec) per phase (docs/screen.md#phases).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, PositiveInt, model_validator

from commstack import limits
from commstack.config import SafeName, StepSpec, Strict, Text, load_named
from commstack.paths import TOP

SCREENS = TOP / "screens"


def _each(fits: Callable[[StepSpec], bool], rule: str) -> AfterValidator:
    def check(v: list[StepSpec]) -> list[StepSpec]:
        for c in v:
            if not fits(c):
                raise ValueError(f"{c.id or c.benchmark}: {rule}")
        return v
    return AfterValidator(check)


class PairPhase(Strict):
    """Node pairs: `rounds` perfect matchings of the allocation, every pair of a round at once."""

    checks: Annotated[list[StepSpec], Field(min_length=1), _each(
        lambda c: c.nodes == 2 and c.ranks_per_node == 1 and not c.node_counts,
        "a pair check runs on nodes: 2 with ranks_per_node: 1")]
    rounds: Annotated[int, Field(ge=1, le=64)] = 2          # partners each node is measured against, at least
    matching: Literal["rotation", "random"] = "rotation"    # round-robin rotation, or a seeded random matching
    seed: int = 0
    #: every pair (mpiGraph's rounds) up to this many nodes: n-1 rounds of n/2 pairs, so bounded (1024 nodes: 523,776
    #: pairs, planned in a second; unbounded, `--plan --nodes 20000` ran on past 2 minutes)
    all_pairs_up_to: Annotated[int, Field(ge=0, le=1024)] = 0
    confirm: bool = True   # a node slow with every partner is measured again against a node found good
    #: pair checks at once (default: the screen's max_steps): fewer where the "nodes" share cores, so that a
    #: figure is the link's and not the share of the cores its step got
    at_once: Annotated[int, Field(ge=1)] | None = None


class GroupPhase(Strict):
    """Leaf-switch groups (`scontrol show topology`): each check on all the nodes of one leaf switch."""

    checks: Annotated[list[StepSpec], Field(min_length=1), _each(
        lambda c: c.nodes == "all", "a group check runs on nodes: all (the switch's nodes)")]


class Rule(Strict):
    """When a figure is slow, and when a node or a pair is called bad."""

    evidence: PositiveInt = 2          # bad measurements a node or a pair needs before it is called bad
    slower_by: Annotated[float, Field(gt=0, lt=1)] = 0.3   # worse than the peers' median by this fraction...
    #: ...and by more than this many MADs of the peers (3 or more: a figure inside the healthy spread is not slow)
    mads: Annotated[float, Field(ge=3, allow_inf_nan=False)] = 4.0


class ScreenFile(Strict):
    name: SafeName
    description: Text = ""
    per_node: Annotated[list[StepSpec], _each(lambda c: c.nodes == 1 and not c.node_counts,
                                              "a per-node check runs on nodes: 1")] = []
    pairs: PairPhase | None = None
    groups: GroupPhase | None = None
    rule: Rule = Rule()
    max_steps: Annotated[int, Field(ge=1, le=100000)] = 256   # srun steps at once (Slurm's MaxStepCount bounds it)
    #: one-node checks at once (default: max_steps): fewer where the "nodes" share cores (the local namespaces)
    per_node_at_once: Annotated[int, Field(ge=1)] | None = None
    path: Path | None = None

    @model_validator(mode="after")
    def _bounded(self) -> "ScreenFile":
        """As a suite's steps: 20,000 checks (1.4 MB of YAML) took 23 s to plan, a 16 MiB file minutes."""
        checks = len(self.per_node) + sum(len(phase.checks) for phase in (self.pairs, self.groups) if phase)
        if checks > limits.STEPS:
            raise ValueError(f"{checks} checks: a screen may have at most {limits.STEPS} (commstack.limits)")
        return self


def load_screen(name_or_path: str | Path) -> ScreenFile:
    """`local` (screens/local.yaml) or a path to a screen file."""
    return load_named(ScreenFile, SCREENS, name_or_path, "screen")
