"""Who is at fault: every figure held against the system's references and the allocation's peers (per check and
size, their median and MAD), then each node judged role by role (sending, receiving, round trip) and each pair;
the rules, and what each verdict means, are docs/screen.md#who-is-at-fault.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from commstack.benchmarks import METRICS
from commstack.results.diagnosis import NAMES, headline, layer_of, quantity, shown, si, size_text
from commstack.results.records import Record
from commstack.screen.matching import Pair, pair
from commstack.screen.spec import Rule
from commstack.tools.base import LAYERS

#: verdicts of a measurement that say nothing about the nodes (the screen was interrupted, a binary was missing)
SILENT = ("not-run",)
#: the roles a node is judged in, and what a bad node is called for each
SENDING, RECEIVING, ROUND_TRIP = "sending", "receiving", "round trip"


@dataclass(frozen=True)
class Spread:
    """The peers of one check and size: their median, MAD and count."""

    median: float
    mad: float
    count: int

    @property
    def relative(self) -> float:
        """MAD / median: the healthy spread of the check in this allocation."""
        return self.mad / self.median if self.median > 0 else float("inf")


@dataclass
class Peers:
    """Per check and size: the peers' median and MAD, from every measurement of that check that ran."""

    stats: dict[tuple[str, int], Spread] = field(default_factory=dict)

    @classmethod
    def of(cls, records: list[Record]) -> "Peers":
        values: dict[tuple[str, int], list[float]] = {}
        for r in records:
            if r.verdict in ("fail", *SILENT):
                continue
            for size, (median, _, _) in r.medians().items():
                values.setdefault((check_of(r), size), []).append(median)
        medians = {key: statistics.median(vs) for key, vs in values.items()}
        return cls({key: Spread(med, statistics.median(abs(v - med) for v in values[key]), len(values[key]))
                    for key, med in medians.items()})

    def told(self, check: str, size: int, higher: bool, rule: Rule) -> float:
        """The smallest slowdown (x times) a figure of this check must show to read slow: the rule's, or more
        where `mads` MADs of the healthy spread reach past it; inf where they reach past zero (a rate)."""
        reach = rule.mads * self.stats[(check, size)].relative
        by_spread = (1 / (1 - reach) if reach < 1 else math.inf) if higher else 1 + reach
        return max(1 / (1 - rule.slower_by), by_spread)

    def slow(self, r: Record, rule: Rule) -> str | None:
        """The first slow figure of `r`, as a person reads it, or None."""
        size = headline(r)
        s = self.stats.get((check_of(r), size))  # None too for a record without figures
        if s is None or s.count < 3 or s.median <= 0:  # fewer than 3 figures: no majority to hold it against
            return None
        value = r.medians()[size][0]
        higher = METRICS[r.metric].higher_is_better
        worse = value < s.median * (1 - rule.slower_by) if higher else value > s.median / (1 - rule.slower_by)
        if worse and abs(value - s.median) > rule.mads * s.mad:
            return f"{figure(r, size, value)} vs {figure(r, size, s.median, bare=True)} peer median"
        return None

    def blunt(self, records: list[Record], rule: Rule) -> dict[str, str]:
        """check -> what it cannot tell, where its healthy spread hides the rule's slowdown (at its headline size,
        that of its first record with figures among the peers)."""
        wanted, seen, out = 1 / (1 - rule.slower_by), set(), {}
        for r in records:
            size, check = headline(r), check_of(r)
            if size is None or check in seen or (check, size) not in self.stats:
                continue
            seen.add(check)
            told = self.told(check, size, METRICS[r.metric].higher_is_better, rule)
            if told > wanted:
                out[check] = (f"spread {self.stats[(check, size)].relative:.0%} at {size_text(size)}: cannot tell a "
                              f"{wanted:.3g}x slowdown here; " +
                              (f"only {told:.3g}x or worse" if told < math.inf else "no slowdown at all"))
        return out


def check_of(r: Record) -> str:
    return r.tags.get("screen_check", r.step)


def sender_of(r: Record) -> str | None:
    """The node that sent, in a one-way check's record; None for a round trip."""
    sender = r.tags.get("screen_from")
    return sender if isinstance(sender, str) and sender in r.nodelist else None


def figure(r: Record, size: int, value: float, bare: bool = False) -> str:
    kind = quantity(r)
    text = shown(kind, si(r, value)) if kind else f"{value:g} {r.unit}"
    return text if bare else f"{check_of(r)} {size_text(size)} {text}"


def why_bad(r: Record, peers: Peers, rule: Rule) -> str | None:
    """Why a measurement counts against its nodes: it failed, the judge found it degraded against a reference,
    or it is slow against its peers; None when it is fine or says nothing."""
    if r.verdict in SILENT:
        return None
    if r.verdict in ("fail", "degraded"):
        return f"{check_of(r)} {'failed' if r.verdict == 'fail' else 'degraded'}: {r.reason}"
    return peers.slow(r, rule)


@dataclass(frozen=True)
class Measurement:
    """One pair check's record, as the verdict reads it: its pair, who sent (one-way) and why it is bad."""

    record: Record
    pair: Pair
    sender: str | None
    why: str | None

    def role(self, node: str) -> str:
        if self.sender is None:
            return ROUND_TRIP
        return SENDING if self.sender == node else RECEIVING

    def partner(self, node: str) -> str:
        a, b = self.pair
        return b if a == node else a

    @property
    def shown(self) -> str | None:
        """The reason with its direction, for a pair's list: `node2->node7: osu_bw ...`."""
        if self.why is None or self.sender is None:
            return self.why
        return f"{self.sender}->{self.partner(self.sender)}: {self.why}"


@dataclass
class Role:
    """A node in one role: the partners it met so, those it was slow with, and the bad figures."""

    partners: set[str] = field(default_factory=set)
    slow_with: set[str] = field(default_factory=set)
    whys: list[str] = field(default_factory=list)

    @property
    def every(self) -> bool:
        """Slow with every partner it met in this role (one or more)."""
        return bool(self.partners) and self.slow_with == self.partners

    def said(self, slow: str) -> str:
        """`slow` (slowness's name for it), its first bad figure and how many partners it was slow with."""
        return f"{slow}: {self.whys[0]} ({len(self.slow_with)} of {len(self.partners)} partners)"


@dataclass
class NodeVerdict:
    node: str
    status: str                 # ok, bad, down (not screened, or gone mid-screen), suspect, not-run, unjudged
    reason: str = ""
    partners: list[str] = field(default_factory=list)
    slow_with: list[str] = field(default_factory=list)
    #: the roles it was slow in with every partner it met so (sending, receiving, round trip)
    slow_in: list[str] = field(default_factory=list)

    def line(self, width: int) -> str:
        """`node3  ok`, `node5  slow sending: osu_bw ...`: a bad node's reason says how it is bad."""
        head = self.reason if self.status == "bad" else self.status + (f": {self.reason}" if self.reason else "")
        return f"{self.node:<{width}}  {head}"


@dataclass
class Findings:
    nodes: dict[str, NodeVerdict]
    bad_pairs: dict[Pair, list[str]]      # pair -> why, measurement by measurement
    suspect_pairs: dict[Pair, list[str]]
    peers: Peers
    blunt: dict[str, str] = field(default_factory=dict)   # check -> the slowdown its spread hides
    lost: list[str] = field(default_factory=list)           # nodes that went down while the screen ran
    blind: list[str] = field(default_factory=list)          # checks whose spread hides the rule's slowdown

    @property
    def bad_nodes(self) -> list[str]:
        return [n for n, v in self.nodes.items() if v.status == "bad"]


def slowness(roles: dict[str, Role]) -> str:
    """What a node slow with every partner is called, from the roles it was so in."""
    ways = [w for w in (SENDING, RECEIVING) if w in roles]
    return "slow both ways" if len(ways) == 2 else f"slow {ways[0]}" if ways else "slow (round trip)"


def judge_node(n: str, measured: list[Measurement], own_bad: list[tuple[int, str]], rule: Rule) -> NodeVerdict:
    """One node from its pair measurements, role by role, and its own bad one-node measurements."""
    roles: dict[str, Role] = {}
    for m in measured:
        role = roles.setdefault(m.role(n), Role())
        role.partners.add(m.partner(n))
        if m.why:
            role.slow_with.add(m.partner(n))
            role.whys.append(m.why)
    partners = sorted({m.partner(n) for m in measured})
    slow_with = sorted({p for r in roles.values() for p in r.slow_with})
    v = NodeVerdict(n, "ok", "", partners, slow_with, [name for name, r in roles.items() if r.every])
    # a role counts against the node when it met two partners or more and was slow with each
    bad = {name: r for name, r in roles.items() if r.every and len(r.partners) >= 2}
    evidence = {name: len(r.whys) + len(own_bad) for name, r in bad.items()}
    proven = {name: r for name, r in bad.items() if evidence[name] >= rule.evidence}
    if proven:
        first = next((proven[x] for x in (SENDING, RECEIVING, ROUND_TRIP) if x in proven))
        v.status, v.reason = "bad", first.said(slowness(proven))
    elif own_bad and len(own_bad) >= rule.evidence:
        v.status, v.reason = "bad", f"fails on its own: {own_bad[0][1]}" + \
            (f"; {len(own_bad) - 1} more" if len(own_bad) > 1 else "")
    elif bad or own_bad:
        count = max(evidence.values(), default=len(own_bad))
        what = next(r.said(slowness({name: r})) for name, r in bad.items()) if bad else own_bad[0][1]
        v.status = "suspect"
        v.reason = f"{what}; {count} bad measurement{'s' if count != 1 else ''}, {rule.evidence} needed"
    return v


def went_down(v: NodeVerdict, measured: list[Measurement], state: str | None) -> str | None:
    """Why a node counts as gone mid-screen: sinfo says so now (`state`), or it failed with every partner and
    every failure was one Slurm calls a node failure; None otherwise."""
    failed = [m for m in measured if m.why]
    if state is None and not (v.status == "bad" and failed and all(m.record.error_kind == "node-failure" for m in failed)):
        return None
    return f"went down mid-screen ({state or 'Slurm reported a node failure on every step with it'}); " \
           f"{len(failed)} of its {len(measured)} pair measurements failed, none counted against its partners"


def attribute(nodes: list[str], down: dict[str, str], node_records: list[Record], pair_records: list[Record],
              facts_problems: dict[str, str], rule: Rule, lost: dict[str, str] | None = None) -> Findings:
    """The verdict of every node and the bad pairs, from the one-node and the pair measurements; `down`: nodes
    not screened (their state when it began), `lost`: nodes that sinfo finds down since."""
    peers = Peers.of(pair_records + node_records)
    measured: list[Measurement] = [Measurement(r, pair(*r.nodelist), sender_of(r), why_bad(r, peers, rule))
                                   for r in pair_records if r.verdict not in SILENT and len(set(r.nodelist)) == 2]
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
    gone: dict[str, NodeVerdict] = {}
    for n in nodes:   # first the nodes that went down: what was measured with them says nothing of the others
        if n not in down:
            v = judge_node(n, [m for m in measured if n in m.pair], sorted(own.get(n, [])), rule)
            if why := went_down(v, [m for m in measured if n in m.pair], (lost or {}).get(n)):
                v.status, v.reason, v.slow_in = "down", why, []
                gone[n] = v
    measured = [m for m in measured if not set(m.pair) & set(gone)]
    blunt = peers.blunt(pair_records + node_records, rule)
    blind = sorted(blunt)   # a node they alone measured is cleared by nothing
    for n in nodes:
        if n in down:
            out[n] = NodeVerdict(n, "down", f"{down[n]}: not screened")
            continue
        v = gone.get(n) or judge_node(n, [m for m in measured if n in m.pair], sorted(own.get(n, [])), rule)
        # the checks that measured it and ran, with a partner or alone
        checks = {check_of(m.record) for m in measured if n in m.pair} | \
            {check_of(r) for r in node_records if r.nodelist == [n] and r.verdict not in SILENT}
        if v.status == "ok" and not checks:
            v.status, v.reason = "not-run", "no check ran on it"
        elif v.status == "ok" and checks <= set(blind):
            v.status, v.reason = "unjudged", f"{', '.join(sorted(checks))}: the spread hides the rule's slowdown here"
        out[n] = v
    by_pair: dict[Pair, list[str]] = {}   # slow pairs of nodes not bad: bad links, or suspect pairs
    for m in measured:
        if m.why and not any(out[x].status == "bad" for x in m.pair):
            by_pair.setdefault(m.pair, []).append(m.shown)
    bad_pairs = {p: whys for p, whys in by_pair.items() if len(whys) >= rule.evidence}
    suspect_pairs = {p: whys for p, whys in by_pair.items() if len(whys) < rule.evidence}
    for (a, b), whys in bad_pairs.items():
        for x, y in ((a, b), (b, a)):
            if out[x].status == "ok":
                out[x].reason = f"link to {y} slow"
    return Findings(out, bad_pairs, suspect_pairs, peers, blunt, list(gone), blind)


def suspects(f: Findings) -> list[str]:
    """Nodes slow with every partner they met in a role: each is measured again against a good node
    (matching.confirm)."""
    return [n for n, v in f.nodes.items() if v.slow_in]


def good(f: Findings) -> list[str]:
    """The partners a confirmation round takes: nodes fine with every partner first, then those fine with some."""
    clean = [n for n, v in f.nodes.items() if v.status != "bad" and v.partners and not v.slow_with]
    some = [n for n, v in f.nodes.items() if v.status != "bad" and 0 < len(v.slow_with) < len(v.partners)]
    return clean + some
