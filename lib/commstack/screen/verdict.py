"""Who is at fault. Every figure of a check is held against the system's references (the judge's verdict on
its record: degraded, fail) and against the allocation's own peers: per check and size, the median of every
measurement of that check and the median absolute deviation (MAD) around it. A figure is slow when it is worse
than the peers' median, at its headline size (the largest of a rate, the smallest of a time), by more than the
rule's fraction (`slower_by`: bandwidths below (1-f)·median, times
above median/(1-f)) and by more than `mads` MADs.

- a node slow (or failing) with every partner it met, at least two, is a bad node;
- a pair slow together whose nodes are not bad is a bad link (or path);
- a node failing a one-node check, or whose facts show a layer missing, is bad at the lowest such layer;
- nothing is called bad on fewer than `evidence` bad measurements (the rule's): one slow figure is noise.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from commstack.benchmarks import METRICS
from commstack.results.diagnosis import NAMES, layer_of, quantity, shown, si, size_text
from commstack.results.records import Record
from commstack.screen.matching import Pair, pair
from commstack.screen.spec import Rule
from commstack.tools.base import LAYERS

#: verdicts of a measurement that say nothing about the nodes (the screen was interrupted, a binary was missing)
SILENT = ("not-run",)


@dataclass
class Peers:
    """Per check and size: the peers' median and MAD, from every measurement of that check that ran."""

    stats: dict[tuple[str, int], tuple[float, float, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, records: list[Record]) -> "Peers":
        values: dict[tuple[str, int], list[float]] = {}
        for r in records:
            if r.verdict in ("fail", *SILENT):
                continue
            for size, (median, _, _) in r.medians().items():
                values.setdefault((check_of(r), size), []).append(median)
        out = {}
        for key, vs in values.items():
            med = statistics.median(vs)
            out[key] = (med, statistics.median(abs(v - med) for v in vs), len(vs))
        return cls(out)

    def slow(self, r: Record, rule: Rule) -> str | None:
        """The first slow figure of `r`, as a person reads it, or None."""
        size = headline(r)
        if size is None:
            return None
        value = r.medians()[size][0]
        med, mad, n = self.stats.get((check_of(r), size), (None, 0.0, 0))
        if med is None or n < 3 or med <= 0:  # fewer than 3 figures: no majority to hold it against
            return None
        higher = METRICS[r.metric].higher_is_better
        worse = value < med * (1 - rule.slower_by) if higher else value > med / (1 - rule.slower_by)
        if worse and abs(value - med) > rule.mads * mad:
            return f"{figure(r, size, value)} vs {figure(r, size, med, bare=True)} peer median"
        return None


def headline(r: Record) -> int | None:
    """The size a check is judged at: the largest of a rate, the smallest of a time (a sweep's small sizes
    of a rate, and large ones of a time, say more about the host than about the link)."""
    medians = r.medians()
    if not medians:
        return None
    return max(medians) if METRICS[r.metric].higher_is_better else min(medians)


def check_of(r: Record) -> str:
    return r.tags.get("screen_check", r.step)


def figure(r: Record, size: int, value: float, bare: bool = False) -> str:
    kind = quantity(r)
    text = shown(kind, si(r, value)) if kind else f"{value:g} {r.unit}"
    return text if bare else f"{check_of(r)} {size_text(size)} {text}"


def why_bad(r: Record, peers: Peers, rule: Rule) -> str | None:
    """Why a measurement counts against its nodes: it failed, the judge found it degraded against a reference,
    or it is slow against its peers; None when it is fine or says nothing."""
    if r.verdict in SILENT:
        return None
    if r.verdict == "fail":
        return f"{check_of(r)} failed: {r.reason}"
    if r.verdict == "degraded":
        return f"{check_of(r)} degraded: {r.reason}"
    return peers.slow(r, rule)


@dataclass
class NodeVerdict:
    node: str
    status: str                 # ok, bad, down (not screened), suspect (one measurement), not-run
    reason: str = ""
    partners: list[str] = field(default_factory=list)
    slow_with: list[str] = field(default_factory=list)

    def line(self, width: int) -> str:
        """`node3  ok`, `node5  slow: osu_bw ...`: a bad node's reason says how it is bad."""
        head = self.reason if self.status == "bad" else self.status + (f": {self.reason}" if self.reason else "")
        return f"{self.node:<{width}}  {head}"


@dataclass
class Findings:
    nodes: dict[str, NodeVerdict]
    bad_pairs: dict[Pair, list[str]]      # pair -> why, measurement by measurement
    suspect_pairs: dict[Pair, list[str]]
    peers: Peers

    @property
    def bad_nodes(self) -> list[str]:
        return [n for n, v in self.nodes.items() if v.status == "bad"]


def attribute(nodes: list[str], down: dict[str, str], node_records: list[Record], pair_records: list[Record],
              facts_problems: dict[str, str], rule: Rule) -> Findings:
    """The verdict of every node and the bad pairs, from the one-node and the pair measurements."""
    peers = Peers.of(pair_records + node_records)
    by_pair: dict[Pair, list[tuple[Record, str | None]]] = {}
    for r in pair_records:
        if r.verdict in SILENT or len(set(r.nodelist)) != 2:
            continue
        by_pair.setdefault(pair(*r.nodelist), []).append((r, why_bad(r, peers, rule)))
    own: dict[str, list[tuple[int, str]]] = {}   # node -> (layer index, why) of its bad one-node measurements
    for r in node_records:
        why = why_bad(r, peers, rule)
        if why and r.nodelist:
            layer = layer_of(r)
            rank = LAYERS.index(layer) if layer else len(LAYERS)
            own.setdefault(r.nodelist[0], []).append((rank, f"{why} ({NAMES.get(layer, 'its layer')})"))
    for node, problem in facts_problems.items():
        own.setdefault(node, []).append((0, f"facts: {problem} (the fabric)"))
    out: dict[str, NodeVerdict] = {}
    for n in nodes:
        if n in down:
            out[n] = NodeVerdict(n, "down", f"{down[n]}: not screened")
            continue
        mine = {p: ms for p, ms in by_pair.items() if n in p}
        partners = sorted({a if a != n else b for a, b in mine})
        bad = {(a if a != n else b): [why for _, why in ms if why] for (a, b), ms in mine.items()}
        slow_with = sorted(p for p, whys in bad.items() if whys)
        whys = [w for p in slow_with for w in bad[p]]
        own_bad = sorted(own.get(n, []))
        every = len(partners) >= 2 and len(slow_with) == len(partners)
        v = NodeVerdict(n, "ok", "", partners, slow_with)
        evidence = len(whys) * every + len(own_bad)
        if every and evidence >= rule.evidence:
            v.status, v.reason = "bad", f"slow: {whys[0]} ({len(slow_with)} of {len(partners)} partners)"
        elif own_bad and evidence >= rule.evidence:
            v.status, v.reason = "bad", f"fails on its own: {own_bad[0][1]}" + \
                (f"; {len(own_bad) - 1} more" if len(own_bad) > 1 else "")
        elif every or own_bad:
            v.status = "suspect"
            v.reason = (own_bad[0][1] if own_bad else f"{whys[0]} ({len(slow_with)} of {len(partners)} partners)") + \
                f"; {evidence} bad measurement{'s' if evidence != 1 else ''}, {rule.evidence} needed"
        elif not partners and not any(r.nodelist == [n] for r in node_records if r.verdict not in SILENT):
            v.status, v.reason = "not-run", "no check ran on it"
        out[n] = v
    bad_pairs, suspect_pairs = {}, {}
    for p, ms in by_pair.items():
        whys = [w for _, w in ms if w]
        if not whys or any(out[x].status == "bad" for x in p):
            continue
        (bad_pairs if len(whys) >= rule.evidence else suspect_pairs)[p] = whys
    for (a, b), whys in bad_pairs.items():
        for x, y in ((a, b), (b, a)):
            if out[x].status == "ok":
                out[x].reason = f"link to {y} slow"
    return Findings(out, bad_pairs, suspect_pairs, peers)


def suspects(f: Findings) -> list[str]:
    """Nodes slow with every partner they met: each is measured again against a good node (matching.confirm)."""
    return [n for n, v in f.nodes.items() if v.partners and len(v.slow_with) == len(v.partners)]


def good(f: Findings) -> list[str]:
    """The partners a confirmation round takes: nodes fine with every partner first, then those fine with some."""
    clean = [n for n, v in f.nodes.items() if v.status != "bad" and v.partners and not v.slow_with]
    some = [n for n, v in f.nodes.items() if v.status != "bad" and 0 < len(v.slow_with) < len(v.partners)]
    return clean + some
