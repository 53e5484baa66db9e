"""The namespace cluster as a fabric, and real faults on it, with `tc` (root), for the screen's tests and by hand:

    python -m commstack.slurm.shaping line node1 ... node8 200mbit     # every node's link: a line rate
    python -m commstack.slurm.shaping node node3 rate 10mbit           # node3's link, both ways
    python -m commstack.slurm.shaping node node3 rate 10mbit out       # ... only what it sends (egress)
    python -m commstack.slurm.shaping node node3 rate 10mbit in        # ... only what it receives (ingress)
    python -m commstack.slurm.shaping link node2 node7 rate 10mbit     # only between node2 and node7, both ways
    python -m commstack.slurm.shaping node node3 delay 10ms            # netem: where the kernel has sch_netem
    python -m commstack.slurm.shaping clear                            # every rule of ours gone

A veth has no line rate: two ranks that get both cores copy GB/s, two that share them with other steps tens of
MB/s, and a screen's peers would spread over two orders of magnitude. A line rate (an htb class every packet
of a node goes through, on its eth0 for what it sends and on its veth's host end for what it receives) makes
a healthy link's figure the link's, as on a real fabric. On top of it:

- a node: its line rate class lowered (rate), or netem under it (delay, loss);
- a link: on each of the two nodes' eth0 a second class, and a u32 filter that sends only the packets to the
  other node's address into it.

A rate is htb alone (every kernel with traffic control has it; some, like this project's VMs, have no
sch_netem); a delay or a loss is netem, where the kernel has it (has_netem).
"""

from __future__ import annotations

import subprocess
import sys

from commstack.slurm import namespaces

UNLIMITED = "100gbit"  # the rate of a class that only carries a netem delay or loss


def tc(netns: str | None, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    argv = (["ip", "netns", "exec", netns] if netns else []) + ["tc", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip()}")
    return proc


def has_netem() -> bool:
    """Whether this kernel has sch_netem: tried on a namespace of its own, made and removed."""
    ns = "cs-netem-probe"
    subprocess.run(["ip", "netns", "add", ns], capture_output=True, timeout=30)
    try:
        return tc(ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms", check=False).returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


#: which way of a node's link a fault slows: what it sends (its eth0), what it receives (its veth's host end)
DIRECTIONS = ("both", "out", "in")


def _ends(node: str, direction: str = "both") -> list[tuple[str | None, str]]:
    """Where a node's traffic is shaped: its eth0 (what it sends), its veth's host end (what it receives)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r}: one of {', '.join(DIRECTIONS)}")
    return [end for way, end in (("out", (namespaces.netns(node), "eth0")), ("in", (None, namespaces.veth(node))))
            if direction in ("both", way)]


def _class(netns: str | None, dev: str, classid: str, kind: str, value: str, change: bool = False) -> None:
    tc(netns, "class", "change" if change else "add", "dev", dev, "parent", "1:", "classid", classid, "htb",
       "rate", value if kind == "rate" else UNLIMITED)
    if kind != "rate":
        tc(netns, "qdisc", "add", "dev", dev, "parent", classid, "handle", f"{classid.split(':')[1]}:", "netem",
           kind, value)


def line(nodes: list[str], rate: str) -> None:
    """Every node's link at `rate`: class 1:20, htb's default."""
    for n in nodes:
        degrade_node(n, "rate", rate)


def degrade_node(node: str, kind: str, value: str, direction: str = "both") -> None:
    """The node's link, both ways or one (`out`: what it sends, `in`: what it receives): its line rate class
    lowered (rate) or delayed or lossy (netem); a node without a line rate gets one class of its own."""
    for ns, dev in _ends(node, direction):
        shaped = "htb 1:" in tc(ns, "qdisc", "show", "dev", dev).stdout
        if not shaped:
            tc(ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "20")
        _class(ns, dev, "1:20", kind, value, change=shaped and kind == "rate")


def degrade_link(a: str, b: str, kind: str, value: str) -> None:
    for x, y in ((a, b), (b, a)):
        ns = namespaces.netns(x)
        if "htb 1:" not in tc(ns, "qdisc", "show", "dev", "eth0").stdout:
            tc(ns, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb")  # no default: the rest unshaped
        _class(ns, "eth0", "1:10", kind, value)
        tc(ns, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip",
           "dst", f"{namespaces.address(y)}/32", "flowid", "1:10")


def clear() -> None:
    """Every root qdisc of ours back to the default (a link without one is left as it is)."""
    for ns in namespaces.present():
        if ns.startswith(namespaces.NETNS_PREFIX):
            for netns, dev in _ends("node" + ns.removeprefix(namespaces.NETNS_PREFIX)):
                tc(netns, "qdisc", "del", "dev", dev, "root", check=False)


if __name__ == "__main__":
    what, *rest = sys.argv[1:] or ["usage"]
    if what == "line" and len(rest) >= 2:
        line(rest[:-1], rest[-1])
    elif what == "node" and len(rest) in (3, 4):
        degrade_node(*rest)
    elif what == "link" and len(rest) == 4:
        degrade_link(*rest)
    elif what == "clear":
        clear()
    else:
        sys.exit(__doc__)
