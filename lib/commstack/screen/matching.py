"""Who is measured with whom: rounds of perfect matchings of the allocation's nodes (rotation or seeded random;
an odd N: one node sits out each round, and a round is added), confirmation partners, and leaf-switch groups
(docs/screen.md#phases).
"""

from __future__ import annotations

import random
import re

Pair = tuple[str, str]


def pair(a: str, b: str) -> Pair:
    """A pair in one order, whichever way it was met: heatmap cells and verdicts key on it."""
    return (a, b) if a <= b else (b, a)


def rotation(nodes: list[str], rounds: int) -> list[list[Pair]]:
    """The first `rounds` rounds of the circle schedule (at most all N-1, N rounded up to even)."""
    ring: list[str | None] = list(nodes) + ([None] if len(nodes) % 2 else [])
    n, out = len(ring), []
    for _ in range(min(rounds, n - 1)):
        out.append([(ring[i], ring[n - 1 - i]) for i in range(n // 2)
                    if ring[i] is not None and ring[n - 1 - i] is not None])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return out


def seeded(nodes: list[str], rounds: int, seed: int, tries: int = 50) -> list[list[Pair]]:
    """`rounds` random perfect matchings from `seed`, each avoiding the pairs of the rounds before where it can."""
    rng, met, out = random.Random(seed), set(), []
    for _ in range(rounds):
        best: list[Pair] = []
        for _ in range(tries):
            order = list(nodes)
            rng.shuffle(order)
            cand = [(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)]
            if not best or sum(pair(*p) in met for p in cand) < sum(pair(*p) in met for p in best):
                best = cand
            if not any(pair(*p) in met for p in best):
                break
        met |= {pair(*p) for p in best}
        out.append(best)
    return out


def rounds_for(nodes: list[str], rounds: int, how: str, seed: int = 0, all_pairs_up_to: int = 0) -> list[list[Pair]]:
    """The pair rounds of a screen: every pair when the allocation is small enough, else `rounds` matchings
    (one more for an odd N, where each round leaves a node out)."""
    if len(nodes) < 2:
        return []
    if len(nodes) <= all_pairs_up_to:
        return rotation(nodes, len(nodes))
    wanted = rounds + len(nodes) % 2
    return rotation(nodes, wanted) if how == "rotation" else seeded(nodes, wanted, seed)


def partners(rounds: list[list[Pair]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, b in (p for rnd in rounds for p in rnd):
        out.setdefault(a, set()).add(b)
        out.setdefault(b, set()).add(a)
    return out


def confirm(suspects: list[str], good: list[str], met: dict[str, set[str]]) -> list[Pair]:
    """One new, good partner for each suspect node, each good node used once (a round: all at once)."""
    free, out = list(good), []
    for s in suspects:
        mate = next((g for g in free if g not in met.get(s, set()) and g != s), None)
        if mate is not None:
            free.remove(mate)
            out.append((s, mate))
    return out


SWITCH = re.compile(r"SwitchName=(\S+)\s+Level=(\d+)\s+LinkSpeed=\S+(?:\s+Nodes=(\S*))?(?:\s+Switches=\S*)?\s*")


def leaf_switches(text: str, expand) -> dict[str, list[str]]:
    """`scontrol show topology` -> leaf switch (level 0) -> its nodes; `expand` turns a hostlist into names
    (scontrol show hostnames). An unknown line is a ValueError quoting it."""
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        m = SWITCH.fullmatch(line.strip() + " ")
        if not m:
            raise ValueError(f"not a line of scontrol show topology: {line.strip()!r}")
        if m.group(2) == "0" and m.group(3):
            out[m.group(1)] = expand(m.group(3))
    return out
