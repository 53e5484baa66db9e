"""Spack tier: the envs through plain Spack, as a site engineer types it (issue 23).

Plain `spack concretize` writes the node's lock or stops with a named error, never a lock of this
host; committed locks hold only nodes of their env's OS and target; the pins hold with no root to
lean on; `spack env activate` gives the stack and the NCCL plugin's settings; alps-login installs
(`--fake`) into a scratch install tree. Every check runs on a staged copy of the repository.
"""

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from commstack.paths import TOP
from commstack.spack import install as spack_install
from commstack.spack.envs import LOCKED, check_nodes, concretize_all, env_dir, lock_nodes, node_arch, \
    off_node, stage

pytestmark = pytest.mark.spack

GH200 = ("gh200-ompi", "gh200-cray", "alps-login")
#: what the seed 002 hook sets, which activation of an env with native nccl-tests must set too (envs/common/nccl.yaml)
NCCL_SETTINGS = {"NCCL_NET_PLUGIN": "ofi", "NCCL_NET": "AWS Libfabric", "FI_CXI_DISABLE_HOST_REGISTER": "1",
                 "FI_MR_CACHE_MONITOR": "userfaultfd", "FI_CXI_RX_MATCH_MODE": "software"}


def staged_with_locks(where: Path) -> Path:
    """A staged copy holding the committed locks too (stage() leaves them out)."""
    top = stage(where)
    for name in LOCKED:
        shutil.copy(TOP / env_dir(name) / "spack.lock", top / env_dir(name) / "spack.lock")
    return top


def host_is_node(name: str) -> bool:
    os_name, target = node_arch(name)
    return platform.machine() == "aarch64" and Path("/etc/os-release").read_text().find(os_name[:4]) >= 0


# ---- committed locks: on their node, whoever wrote them ------------------------------------------

@pytest.mark.parametrize("env", LOCKED)
def test_committed_lock_is_on_its_node(env):
    nodes = lock_nodes(TOP / env_dir(env) / "spack.lock")
    assert off_node(env) == [], off_node(env)
    assert {n["arch"] for n in nodes.values()} == {"-".join(node_arch(env))}


def test_the_nodes_check_names_a_tainted_lock(tmp_path):
    """A lock as plain Spack wrote it on this x86_64 Debian host before issue 23: the check names the
    env, the node and its arch; CI's command exits 1 on it and 0 on the committed locks."""
    lock = json.loads((TOP / env_dir("gh200-ompi") / "spack.lock").read_text())
    zlib = next(s for s in lock["concrete_specs"].values() if s["name"] == "zlib-ng")
    zlib["arch"]["platform_os"] = "debian12"
    tainted = tmp_path / "spack.lock"
    tainted.write_text(json.dumps(lock))
    lines = off_node("gh200-ompi", tainted)
    assert len(lines) == 1 and lines[0].startswith("env gh200-ompi: zlib-ng (")
    assert lines[0].endswith("is debian12-neoverse_v2, not the node's ubuntu24.04-neoverse_v2")
    check_nodes()  # the committed ones
    proc = subprocess.run([sys.executable, str(TOP / "ci" / "concretize.py"), "--nodes"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "gh200-ompi, gh200-cray, alps-login" in proc.stdout, proc.stderr
    proc = subprocess.run([sys.executable, str(TOP / "ci" / "concretize.py"), "--nodes", "gh200-nope"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown env 'gh200-nope'" in proc.stderr


# ---- plain Spack on this host -----------------------------------------------------------------

@pytest.mark.parametrize("env", GH200)
def test_plain_concretize_on_another_host_stops_with_the_fix(spack, tmp_path, env):
    """`spack -e envs/ENV concretize -f` here (x86_64 Debian CI, or any host that is not the node):
    a named error naming the node it is not and `bin/commstack lock`, and the committed lock untouched."""
    if host_is_node(env):
        pytest.skip(f"this host is a {node_arch(env)} node: plain Spack writes the node's lock here")
    top = staged_with_locks(tmp_path)
    before = (top / env_dir(env) / "spack.lock").read_bytes()
    proc = spack("concretize", "-f", env_dir=top / env_dir(env), check=False, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-2000:]
    node = "an Ubuntu 24.04 GH200 node (glibc 2.39)" if env == "gh200-ompi" else \
        "an Alps SLES 15 GH200 node (glibc 2.38, /usr/bin/gcc-13)"
    reasons = [" ".join(r.split()) for r in re.findall(r"^ +\d+\. (.*(?:\n {8,}.*)*)", out, re.M)]
    assert reasons and reasons[0].startswith(f"this host is not {node}"), out[-3000:]
    assert "`bin/commstack lock`" in reasons[0]
    # the userland's compiler is required (gh200.yaml): no built compiler, and none of its conflicts, is offered
    # as a reason; where this host's gcc runs, Spack adds its libc's target and OS, nothing else
    assert all("glibc" in r for r in reasons[1:]), reasons
    assert (top / env_dir(env) / "spack.lock").read_bytes() == before


def test_plain_spec_without_an_arch(spack, tmp_path):
    """`spack -e envs/gh200-ompi spec openmpi`, the root naming no arch: on the node it solves (libfabric
    cxi +cuda); on x86_64 the solver is offered no GH200 target, and the user gets the target
    requirement's message, not Spack's bare `Error: <number>` (static analysis once pruned every target)."""
    top = stage(tmp_path)
    proc = spack("spec", "openmpi", env_dir=top / env_dir("gh200-ompi"), check=False, timeout=900)
    out = proc.stdout + proc.stderr
    if host_is_node("gh200-ompi"):
        assert proc.returncode == 0, out[-3000:]
        fabric = next(line for line in proc.stdout.splitlines() if "libfabric@" in line)
        assert re.search(r"fabrics:?=cxi,shm,tcp\b", fabric) and "+cuda" in fabric, fabric
        return
    if platform.machine() == "aarch64":
        pytest.skip("aarch64 host that is not the node: the libc message, as for concretize above")
    assert proc.returncode != 0 and "KeyError" not in out, out[-3000:]
    assert "this host is not a GH200 node (aarch64 neoverse_v2)" in " ".join(out.split()), out[-3000:]
    assert "`target=neoverse_v2`" in out and "`bin/commstack lock`" in out


# ---- pins as requirements ---------------------------------------------------------------------

def test_pins_hold_with_openmpi_alone(spack, tmp_path):
    """gh200-ompi with the one root `openmpi` (no libfabric or UCX root to lean on): libfabric is cxi,
    +cuda, +gdrcopy and UCX +cuda +gdrcopy by the requirements of envs/common alone."""
    top = stage(tmp_path)
    manifest = top / env_dir("gh200-ompi") / "spack.yaml"
    text = manifest.read_text()
    specs = text[text.index("  specs:"):text.index("  # `spack env activate")]
    manifest.write_text(text.replace(specs, "  specs:\n  - openmpi arch=linux-ubuntu24.04-neoverse_v2\n"))
    c = concretize_all(spack, ["gh200-ompi"], top)["gh200-ompi"]
    fabric, ucx, ompi = c.one("libfabric"), c.one("ucx"), c.one("openmpi")
    assert set(fabric["variants"]["fabrics"]) == {"cxi", "shm", "tcp"}
    assert fabric["variants"]["cuda"] is True and fabric["variants"]["gdrcopy"] is True
    assert ucx["variants"]["cuda"] is True and ucx["variants"]["gdrcopy"] is True
    assert {"ofi", "ucx", "cma"} <= set(ompi["variants"]["fabrics"]) and ompi["variants"]["cuda"] is True
    assert {n["os"] for n in c.nodes} == {"ubuntu24.04"}


# ---- NCCL's plugin on bare metal --------------------------------------------------------------

@pytest.mark.parametrize("env", ("gh200-ompi", "gh200-cray"))
def test_activation_sets_what_loads_the_nccl_plugin(spack, tmp_path, env):
    """Both envs with native nccl-tests lock aws-ofi-nccl for their MPI, and `spack env activate --sh`
    exports the seed 002 hook's settings."""
    nodes = lock_nodes(TOP / env_dir(env) / "spack.lock")
    assert "aws-ofi-nccl" in nodes and "nccl-tests" in nodes
    mpi = "openmpi" if env == "gh200-ompi" else "cray-mpich"
    assert {"libfabric", "nccl", mpi} <= set(nodes["aws-ofi-nccl"]["deps"])
    top = staged_with_locks(tmp_path)
    proc = spack("env", "activate", "--sh", str(top / env_dir(env)), timeout=300)
    for name, value in NCCL_SETTINGS.items():
        assert (f"export {name}={value};" in proc.stdout or f"export {name}='{value}';" in proc.stdout), \
            (name, proc.stdout)


# ---- alps-login on a login node ---------------------------------------------------------------

def test_alps_login_installs_and_activates(spack, tmp_path):
    """`spack install --fake` of the committed alps-login lock into a scratch install tree goes through
    (xpmem without its kernel module: no kernel sources, no root); activation then puts the view's
    bin (Open MPI, mpi-pingpong) and OSU's directories on PATH, and the Lmod tree is written."""
    nodes = lock_nodes(TOP / env_dir("alps-login") / "spack.lock")
    assert nodes["xpmem"]["variants"]["kernel-module"] is False
    assert nodes["openmpi"]["variants"]["cray-xpmem"] is True
    assert nodes["gcc"]["external"] == "/usr" and nodes["gcc"]["version"] == "13.2.1"
    top = staged_with_locks(tmp_path / "repo")
    env = top / env_dir("alps-login")
    tree = ("-c", f"config:install_tree:root:{tmp_path / 'store'}")
    spack(*tree, "install", "--fake", env_dir=env, timeout=1200)
    view = env / ".spack-env" / "view"
    assert {"openmpi", "mpi-pingpong"} <= {p.name for p in (view / "bin").iterdir()}
    assert not (view / "bin" / "autoconf").exists()  # link: run, no build tools
    # Open MPI's openssh is the node's, an external, never in the view (--fake: bin/<package> per package)
    assert not (view / "bin" / "openssh").exists()
    out = spack(*tree, "env", "activate", "--sh", str(env), timeout=300).stdout
    path = next(line for line in out.split(";") if line.strip().startswith("export PATH=")).split("=", 1)[1]
    assert f"{view}/bin" in path
    assert f"{view}/libexec/osu-micro-benchmarks/mpi/pt2pt" in path
    spack(*tree, "module", "lmod", "refresh", "-y", env_dir=env, timeout=600)
    core = env / ".spack-env" / "modules" / "Core"
    assert (core / "openmpi" / "5.0.8.lua").is_file(), sorted(p.name for p in core.iterdir())
    below = list((env / ".spack-env" / "modules").glob("openmpi/5.0.8*/**/osu-micro-benchmarks/7.5.1.lua"))
    assert below, "OSU's module is below Open MPI's in the hierarchy"


# ---- what an Alps node already has --------------------------------------------------------------

#: SLES's own packages, never built for an Alps env; and for gh200-cray NCCL and the verbs library under it
NODE_PACKAGES = {"alps-login": ("perl", "openssl", "openssh", "krb5"),
                 "gh200-cray": ("perl", "openssl", "openssh", "krb5", "nccl", "rdma-core")}
#: `spack find -c -p`'s line for one concrete spec: status ([e] external, [+] installed, - to build), spec, prefix
FIND_LINE = re.compile(r"(\[e\]|\[\+\]| - ) +([\w-]+)@(\S+) +(\S+)")


@pytest.mark.parametrize("env", ("alps-login", "gh200-cray"))
def test_alps_envs_take_the_node_system_packages(spack, tmp_path, env):
    """`spack -e envs/ENV find -c -p` on the committed lock: each of SLES's (and for gh200-cray the
    vendor's) packages is an external ([e]) at the node's prefix, or not in the DAG at all; none is
    built (issue 36 item 8: alps-login built perl, openssl, openssh and krb5; gh200-cray NCCL and rdma-core)."""
    top = staged_with_locks(tmp_path)
    out = spack("find", "-c", "-p", *NODE_PACKAGES[env], env_dir=top / env_dir(env), timeout=300).stdout
    found = {m[2]: (m[1], m[3], m[4]) for m in map(FIND_LINE.fullmatch, out.splitlines()) if m}
    assert set(found) <= set(NODE_PACKAGES[env]), out
    assert {name: status for name, (status, _, _) in found.items() if status != "[e]"} == {}, out
    # the lock as Spack wrote it agrees: no node of these without its 'external' entry
    nodes = lock_nodes(TOP / env_dir(env) / "spack.lock")
    assert {n: nodes[n]["external"] for n in NODE_PACKAGES[env] if n in nodes} == \
        {n: prefix for n, (_, _, prefix) in found.items()}
    # what the DAG does need comes from the node: perl (autotools), openssh (Open MPI's rsh launch)
    sles = {"perl", "openssh", "openssl"} if env == "alps-login" else {"perl"}
    assert {n: found[n][2] for n in sles if n in found} == dict.fromkeys(sles, "/usr"), out
    assert found["perl"][1] == "5.26.1"
    if env == "gh200-cray":  # NCCL of the HPC SDK that holds the cuda external
        sdk = Path(nodes["cuda"]["external"]).parents[1]
        assert Path(found["nccl"][2]) == sdk / "comms" / "nccl" and found["nccl"][1] == "2.25.1-1", out


# ---- the wrong machine ------------------------------------------------------------------------

def test_install_on_a_host_that_cannot_run_the_target_stops_first():
    """Plain `spack install` on x86_64 installs compiler-wrapper and fails later (a fetch here); the
    site job's check stops before, naming the env's target and this host's."""
    if platform.machine() == "aarch64":
        pytest.skip("this host runs neoverse_v2 code (aarch64): nothing to refuse")
    # as docs/environments.md shows it: its shebang's python3 has no commstack (issue 36 item 7)
    shell = {**os.environ, "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([str(TOP / "ci" / "check-host.py"), "alps-login"], capture_output=True, text=True,
                          timeout=300, env=shell)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "env alps-login is built for neoverse_v2 (sles15) nodes; this host is " in proc.stderr
    assert "(x86_64), which cannot run it: install it on the node" in proc.stderr
    ok = subprocess.run([sys.executable, str(TOP / "ci" / "check-host.py"), "local"], capture_output=True,
                        text=True, timeout=300)
    assert ok.returncode == 0 and "local: this host (this machine)" in ok.stdout


# ---- the harness finds its binaries through the view ------------------------------------------

def test_harness_takes_osu_from_the_local_view(tmp_path, monkeypatch):
    view = tmp_path / "view"
    (view / ".spack" / "osu-micro-benchmarks").mkdir(parents=True)
    monkeypatch.setattr(spack_install, "VIEW", view)
    assert spack_install.location(Path("/bin/false"), "osu-micro-benchmarks") == str(view)
    # a package the view does not hold is asked of Spack (here: a Spack that answers nothing)
    assert spack_install.location(Path("/bin/false"), "nccl-tests") is None
