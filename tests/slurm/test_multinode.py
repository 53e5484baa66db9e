"""The multi-node local cluster for real: 2 network-namespace nodes on a veth bridge, one slurmd each,
mpi-pingpong across them over TCP, a node that dies during a step, and a stop that leaves nothing.

The tests run in file order: the last two kill a node and stop the cluster.
"""

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from waits import namespace_cluster_alone, ranks_busy, wait_until

from commstack.errors import AllocationLostError, NodeFailureError
from commstack.files import write_atomic
from commstack.run.launch import Allocation, Launcher, Step
from commstack.slurm.cluster import LocalSlurm
from commstack.slurm import namespaces
from commstack.slurm.namespaces import BRIDGE, NETNS_PREFIX, VETH_PREFIX, NamespaceError, veth
from commstack.tools.mpi_pingpong import parse_pingpong
from commstack.config import load_system

pytestmark = pytest.mark.multinode
TOP = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(pytestconfig, results_dir):
    mode = pytestconfig.getoption("--slurm")
    if mode in ("off", "external"):
        pytest.skip(f"multinode: --slurm={mode}; this tier starts its own local cluster")
    if os.geteuid() != 0:
        pytest.skip("multinode: network namespaces need root")
    missing = [p for p in ("ip", "slurmctld", "slurmd", "munged", "srun") if not shutil.which(p, path=_path())]
    if missing:
        pytest.skip(f"multinode: {', '.join(missing)} not found (ci/install-deps.sh)")
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"multinode: `ip netns list` fails: {probe.stderr.strip()}")
    with namespace_cluster_alone(pytestconfig):
        c = LocalSlurm.multinode(2)
        try:
            c.start()  # a lease: a cluster someone else also uses is not stopped under them
        except NamespaceError as e:
            pytest.skip(f"multinode: {e}")
        try:
            yield c
        finally:
            if (c.root / "log").is_dir():
                shutil.copytree(c.root / "log", results_dir / "multinode-slurm-logs", dirs_exist_ok=True)
            c.stop()


@pytest.fixture(scope="module")
def env(cluster):
    """Clients of this cluster only: no job of an outer allocation leaks in."""
    return {k: v for k, v in cluster.variables.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}


@pytest.fixture(scope="module")
def system():
    return load_system("local-multinode")


@pytest.fixture(scope="module")
def pingpong(results_dir):
    """mpi-pingpong built with make and the system's mpicc (Debian Open MPI)."""
    if not shutil.which("mpicc"):
        pytest.skip("no mpicc on PATH to build mpi-pingpong (install libopenmpi-dev: ci/install-deps.sh)")
    out = results_dir / "build" / "multinode" / "mpi-pingpong"
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["make", "-C", str(TOP / "src" / "mpi-pingpong"), "-B", f"OUT={out}"],
                          capture_output=True, text=True)
    write_atomic(out.parent / "build.log", proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"building mpi-pingpong failed:\n{proc.stderr}"
    return out


def test_srun_hostname_on_both_nodes(cluster, env):
    proc = subprocess.run(["srun", "-N2", "-n2", "--ntasks-per-node=1", "-t1", "hostname"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == ["node1", "node2"]


def test_pingpong_crosses_the_virtual_network(cluster, env, system, pingpong, step_dir):
    step = Step("mpi-pingpong-2nodes", [str(pingpong), "-m", "cpu", "-b", "8", "-e", "4M", "-n", "20"],
                nodes=2, ntasks=2, ntasks_per_node=1, timeout_s=120,
                variables={"OMPI_MCA_btl_base_verbose": "100"})  # names the BTL used per peer, on stderr
    with Allocation(system, env, nodes=2, ntasks=2) as alloc:
        launcher = Launcher(system, "srun", slurm_variables=env, allocation=alloc)
        before = _counters(cluster)
        result = launcher.run(step, step_dir)
        after = _counters(cluster)
    sweep = parse_pingpong(result.stdout)
    # every size, both ways: warm-up and timed round trips
    payload = (sweep.meta["warmup"] + sweep.meta["loops"]) * sum(sweep.sizes)
    grown = {n: {k: after[n][k] - before[n][k] for k in ("rx", "tx")} for n in after}
    used = sorted(set(re.findall(r"^\[(node\d+):\d+\] mca: bml: Using (\w+) btl for send to \S+ on node (node\d+)",
                                 result.stderr, re.M)))
    print(dict(command=result.command, nodelist=result.nodelist, rows=sweep.rows, payload_bytes=payload,
               veth_bytes=grown, btl=used))
    assert sweep.complete and sweep.sizes == [8 << i for i in range(20)]
    assert all(r["check"] == "Pass" for r in sweep.rows)
    assert sorted(result.nodelist) == ["node1", "node2"]
    # host side of a node's veth: RX is what the node sent, TX what it received
    for node, g in grown.items():
        assert g["rx"] >= payload and g["tx"] >= payload, f"{node}: {g} < {payload} payload bytes"
    cross = {(a, btl, b) for a, btl, b in used if a != b}
    assert cross == {("node1", "tcp", "node2"), ("node2", "tcp", "node1")}, used


@pytest.mark.parametrize("benchmark", ["fi_pingpong", "ucx_perftest-tag_bw"])
def test_the_lower_layers_pair_crosses_the_virtual_network(cluster, env, system, step_dir, benchmark):
    """The stack suite's fabric and UCX steps: the server on node1, the client on node2 reaching it at
    node1's address, the payload over the veths."""
    from commstack import benchmarks
    from commstack.config import load_suite
    from commstack.results.parse import parse_output
    from commstack.run.pair import repeat_step
    from commstack.run.lifecycle import launched_step
    from commstack.run.runner import substitute
    from commstack.run.steps import expand
    tool = benchmarks.get(benchmark).tool
    if not shutil.which(tool.name):
        pytest.skip(f"no {tool.name} (Debian: apt-get install libfabric-bin ucx-utils)")
    s = next(s for s in expand(load_suite("stack"), system, {}, "host") if s.benchmark == benchmark)
    step = launched_step(s, substitute(s.step.argv, {tool.placeholder: tool.native(None)}))
    with Allocation(system, env, nodes=2, ntasks=2) as alloc:
        launcher = Launcher(system, "srun", slurm_variables=env, allocation=alloc)
        before = _counters(cluster)
        result = launcher.run(repeat_step(step, step_dir), step_dir)
        after = _counters(cluster)
    sweep = parse_output(benchmark, result.stdout, step.argv[1:])
    server = (step_dir / "pair" / "server.json").read_text()
    payload = sum(sweep.sizes) * sweep.rows[0]["iterations"]  # one way at least
    grown = {n: {k: after[n][k] - before[n][k] for k in ("rx", "tx")} for n in after}
    print(dict(command=result.command, rows=sweep.rows, server=server, veth_bytes=grown))
    assert sorted(result.nodelist) == ["node1", "node2"] and namespaces.address("node1") in server
    assert sweep.meta["args"][-1 if benchmark == "fi_pingpong" else 0] == namespaces.address("node1")
    assert grown["node1"]["tx"] >= payload and grown["node2"]["rx"] >= payload, (grown, payload)


def test_node_failure_is_a_named_error(cluster, env, system, pingpong, step_dir):
    if len(cluster.leases.live()) > 1:  # ours, and a run or another session's: its jobs would die with node2
        pytest.skip(f"multinode: others use the cluster too ({', '.join(cluster.leases.live())}); no node is killed "
                    "under them")
    step = Step("mpi-pingpong-long", [str(pingpong), "-b", "8", "-e", "8", "-n", "2000000000"],
                nodes=2, ntasks=2, ntasks_per_node=1, timeout_s=180)
    outcome: dict = {}
    with Allocation(system, env, nodes=2, ntasks=2) as alloc:
        launcher = Launcher(system, "srun", slurm_variables=env, allocation=alloc)

        def run() -> None:
            try:
                outcome["result"] = launcher.run(step, step_dir)
            except Exception as e:  # noqa: BLE001 - judged below
                outcome["error"] = e

        t = threading.Thread(target=run)
        t.start()
        ns = NETNS_PREFIX + "2"
        wait_until(lambda: any("mpi-pingpong" in _cmdline(p) for p in _netns_pids(ns)), "the step starts on node2",
                   alive=t.is_alive, poll=0.2)
        wait_until(lambda: ranks_busy(str(pingpong)), "MPI wired up, ranks ping-ponging", alive=t.is_alive)
        killed = _netns_pids(ns)
        for pid in killed:  # node2 crashes: slurmd, slurmstepd and the rank, all at once
            os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        t.join(timeout=170)
        assert not t.is_alive(), "srun still running after node2 died"
        with pytest.raises(AllocationLostError, match=r"again: not run: the allocation \(job \d+\) ended during "
                                                      r"step mpi-pingpong-long \(job state: NODE_FAIL\)"):
            launcher.run(dataclasses.replace(step, name="again"), step_dir.parent / "again")  # never launched
    err = outcome.get("error")
    print(dict(killed=len(killed), detected_after_s=round(time.monotonic() - t0, 1), error=repr(err)))
    assert isinstance(err, NodeFailureError), err or outcome.get("result")
    assert err.raw == str(step_dir)
    assert "Node failure on node2" in (step_dir / "stderr.txt").read_text()
    assert "# mpi-pingpong v" in (step_dir / "stdout.txt").read_text()
    assert '"error": "node-failure"' in (step_dir / "step.json").read_text()


def test_stop_leaves_nothing_behind(cluster):
    if not cluster.stop():
        pytest.skip(f"multinode: others still use the cluster ({', '.join(cluster.leases.live())}); it is left running")
    assert cluster.stop() is True  # idempotent
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    procs = subprocess.run(["pgrep", "-af", str(cluster.root)], capture_output=True, text=True).stdout
    assert not re.search(rf"^{NETNS_PREFIX}\d", netns, re.M), netns
    assert not re.search(rf"^\d+: ({VETH_PREFIX}\d|{BRIDGE})", links, re.M), links
    assert not procs.strip(), procs
    assert not cluster.processes()
    assert not [d for d in ("run", "state", "spool", "tmp") if (cluster.root / d).exists()]


def _counters(cluster: LocalSlurm) -> dict[str, dict[str, int]]:
    stats = Path("/sys/class/net")
    return {n: {k: int((stats / veth(n) / "statistics" / f"{k}_bytes").read_text()) for k in ("rx", "tx")}
            for n in cluster.node_names}


def _netns_pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
