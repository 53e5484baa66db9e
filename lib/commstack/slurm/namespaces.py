"""The nodes of the multi-node local cluster (LocalSlurm.multinode, root only): one network namespace per node on a
bridge of this host (the names and addresses below), each running its own slurmd; slurmctld and munged run on the
host. One such cluster per machine: the names and the subnet are fixed. A host whose firewall drops bridged
forwarding (br_netfilter with FORWARD policy DROP) breaks node-to-node traffic.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from commstack.errors import SlurmUnavailableError
from commstack.slurm import procs

BRIDGE, SUBNET, NETNS_PREFIX, VETH_PREFIX = "csbr0", "10.77.0", "cs-node", "csv-node"
IP_TIMEOUT = 30.0  # s for `ip`: a hung one must not hang the start or the clean-up
#: node<i> is SUBNET.(10+i) in one /24: .254 is its last host address
MAX_NODES = 244


class NamespaceError(SlurmUnavailableError):
    """The namespaces, veths or bridge of the multi-node cluster could not be made (not root, no iproute2)."""


def check_count(nodes: int) -> None:
    """A named error, before anything is made, for more nodes than the subnet holds (`ip addr add` failed at
    node245, with 244 namespaces and their slurmd already started)."""
    if nodes > MAX_NODES:
        raise NamespaceError(f"--nodes {nodes}: the local multi-node cluster has at most {MAX_NODES} nodes "
                             f"({SUBNET}.11 to {SUBNET}.254)")


def netns(node: str) -> str:
    return NETNS_PREFIX + node.removeprefix("node")


def veth(node: str) -> str:
    """The host-side end of a node's veth: its RX counts what the node sent, its TX what it received."""
    return VETH_PREFIX + node.removeprefix("node")


def address(node: str) -> str:
    return f"{SUBNET}.{10 + int(node.removeprefix('node'))}"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([shutil.which("ip", path=procs.sbin_path()) or "ip", *args], capture_output=True, text=True,
                          timeout=IP_TIMEOUT)
    if check and proc.returncode != 0:
        hint = "" if os.geteuid() == 0 else " (network namespaces need root)"
        raise NamespaceError(f"`ip {' '.join(args)}` failed (exit {proc.returncode}): {proc.stderr.strip()}{hint}")
    return proc


def present() -> list[str]:
    return ip("netns", "list", check=False).stdout.split()


def up(nodes: list[str]) -> None:
    """The bridge, and for each node its namespace and veth, addressed and up."""
    ip("link", "add", BRIDGE, "type", "bridge")
    ip("addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
    ip("link", "set", BRIDGE, "up")
    for n in nodes:
        ns = netns(n)
        ip("netns", "add", ns)
        ip("link", "add", veth(n), "type", "veth", "peer", "name", "eth0", "netns", ns)
        ip("link", "set", veth(n), "master", BRIDGE, "up")
        ip("-n", ns, "addr", "add", f"{address(n)}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "link", "set", "lo", "up")


def down() -> None:
    """Every cs-node namespace (and what still runs in it), csv-node veth and the bridge, whatever N was."""
    if not shutil.which("ip", path=procs.sbin_path()):
        return
    for ns in re.findall(rf"^({NETNS_PREFIX}\d+)\b", ip("netns", "list", check=False).stdout, re.M):
        # slurmstepd and tasks outlive their slurmd: end everything left in the namespace
        procs.kill_all(lambda: map(int, ip("netns", "pids", ns, check=False).stdout.split()))
        ip("netns", "del", ns, check=False)
    links = ip("-o", "link", "show", check=False).stdout
    for name in re.findall(rf"^\d+: ({VETH_PREFIX}\d+|{BRIDGE})[@:]", links, re.M):
        ip("link", "del", name, check=False)
