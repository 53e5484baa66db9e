"""Spack tier: every env concretizes to exactly the pinned stack; locks don't drift; audits pass.

All envs are concretized once per session on a staged copy (conftest.concrete), so a failing
check modifies nothing in the repository.
"""

import json
import os
import shutil
from pathlib import Path

import pytest

from commstack.spack.envs import (ENVS, LOCKED, EnvError, concretize_all, env_dir, lock_diff, root_mismatches,
                                  stage)
from commstack.errors import ConfigError
from commstack.spack import Spack
from commstack.paths import TOP

pytestmark = pytest.mark.spack

GH200 = ("gh200-ompi", "gh200-cray", "alps-login")
OS = {"gh200-ompi": "ubuntu24.04", "gh200-cray": "sles15", "alps-login": "sles15"}
LIBC = {"ubuntu24.04": "2.39", "sles15": "2.38"}


def values(node: dict, variant: str) -> set[str]:
    v = node["variants"][variant]
    return set(v) if isinstance(v, list) else {str(v)}


@pytest.mark.parametrize("env", GH200)
def test_gh200_nodes_are_neoverse_v2_hopper(concrete, env):
    c = concrete[env]
    built = [n for n in c.nodes if not n["external"]]
    assert built and {n["target"] for n in built} == {"neoverse_v2"}
    # every node, not only the roots: the node's OS and libc, never those of the machine locking
    assert {n["os"] for n in c.nodes} == {OS[env]}, sorted({(n["name"], n["os"]) for n in c.nodes if n["os"] != OS[env]})
    assert c.one("glibc")["version"] == LIBC[OS[env]] and c.one("glibc")["external"]
    for n in c.nodes:
        if n["variants"].get("cuda") is True and "cuda_arch" in n["variants"] and not n["external"]:
            assert values(n, "cuda_arch") == {"90"}, f"{n['name']}: {n['variants']}"


@pytest.mark.parametrize("env", GH200)
def test_gh200_benchmarks_are_the_pinned_ones(concrete, env):
    c = concrete[env]
    osu = c.one("osu-micro-benchmarks")
    assert (osu["version"], osu["namespace"], osu["variants"]["cuda"]) == ("7.5.1", "commstack", True)
    if env != "alps-login":
        nccl_tests = c.one("nccl-tests")
        assert (nccl_tests["version"], nccl_tests["namespace"]) == ("2.17.1", "commstack")
        assert nccl_tests["variants"]["mpi"] is True and values(nccl_tests, "cuda_arch") == {"90"}
    pingpong = c.one("mpi-pingpong")
    assert pingpong["variants"]["cuda"] is True and "cuda" in pingpong["deps"]
    assert c.one("cuda")["version"] == "12.8.1"
    assert c.one("libfabric")["version"] == "1.22.0" and "cxi" in values(c.one("libfabric"), "fabrics")
    assert c.one("libfabric")["variants"]["cuda"] is True  # seed 000 configures libfabric --with-cuda


def test_gh200_ompi_is_the_seed_image_stack(concrete):
    c = concrete["gh200-ompi"]
    ompi = c.one("openmpi")
    assert (ompi["version"], ompi["namespace"], ompi["external"]) == ("5.0.8", "commstack", False)
    assert ompi["variants"]["cuda"] is True and ompi["variants"]["openshmem"] is True
    assert {"ofi", "ucx", "cma"} <= values(ompi, "fabrics") and "slurm" in values(ompi, "schedulers")
    assert {"pmix", "ucx", "libfabric", "cuda", "slurm"} <= set(ompi["deps"])
    assert c.one("slurm")["external"]
    ucx = c.one("ucx")
    assert ucx["version"] == "1.19.0"
    assert all(ucx["variants"][v] is True for v in ("cuda", "gdrcopy", "thread_multiple"))
    assert c.one("gdrcopy")["version"] == "2.5.1"
    # the image userland: CUDA and NCCL are the NVIDIA base image's, never built
    nccl, cuda = c.one("nccl"), c.one("cuda")
    assert (nccl["version"], nccl["external"], nccl["prefix"]) == ("2.25.1-1", True, "/usr")
    assert values(nccl, "cuda_arch") == {"90"}
    assert (cuda["version"], cuda["external"], cuda["prefix"]) == ("12.8.1", True, "/usr/local/cuda-12.8")
    # nccl-tests run natively too: NCCL's libfabric plugin for this MPI (in the images the hook brings it)
    assert {"libfabric", "nccl", "openmpi"} <= set(c.one("aws-ofi-nccl")["deps"])
    fabric = c.one("libfabric")
    assert values(fabric, "fabrics") == {"cxi", "shm", "tcp"} and fabric["variants"]["gdrcopy"] is True
    # Slingshot user space by commit (alps-cluster-config network.yaml): the same with or without network
    for pkg in ("libcxi", "cxi-driver", "cassini-headers"):
        assert c.one(pkg)["version"].startswith("git.") and c.one(pkg)["variants"]["commit"], pkg


def test_gh200_cray_uses_the_cray_pe(concrete):
    c = concrete["gh200-cray"]
    mpich = c.one("cray-mpich")
    assert mpich["external"] and mpich["version"] == "8.1.30"
    assert mpich["variants"]["wrappers"] is True and mpich["variants"]["cuda"] is True
    assert mpich["prefix"].startswith("/opt/cray/pe/mpich/")
    fabric = c.one("libfabric")
    assert fabric["external"] and fabric["prefix"] == "/opt/cray/libfabric/1.22.0"
    assert c.one("cuda")["external"]
    assert mpich["variants"]["cuda_arch"] == ["90"]  # the GTL is chosen by cuda_arch (test_recipes)
    assert not {"openmpi", "mpich", "ucx"} & set(c.names())
    assert "libfabric" in c.one("aws-ofi-nccl")["deps"]
    for root in ("osu-micro-benchmarks", "nccl-tests", "mpi-pingpong", "aws-ofi-nccl"):
        assert "cray-mpich" in c.one(root)["deps"] or "libfabric" in c.one(root)["deps"], root


def test_alps_envs_share_the_node_userland(concrete):
    """gh200-cray and alps-login run on the same Alps nodes: one compiler, libc, CUDA and libfabric
    (envs/common/alps.yaml); alps-login's Open MPI as network.yaml builds it, installable on a login
    node (xpmem without its kernel module)."""
    cray, login = concrete["gh200-cray"], concrete["alps-login"]
    for pkg in ("gcc", "glibc", "cuda", "libfabric"):
        a, b = cray.one(pkg), login.one(pkg)
        assert (a["version"], a["prefix"]) == (b["version"], b["prefix"]), pkg
    assert cray.one("gcc")["version"] == "13.2.1"
    ompi = login.one("openmpi")
    assert values(ompi, "fabrics") == {"cma", "ofi", "xpmem"}
    assert ompi["variants"]["cray-xpmem"] is True and ompi["variants"]["internal-pmix"] is True
    assert login.one("xpmem")["variants"]["kernel-module"] is False


def test_local_builds_our_benchmarks_on_the_system_mpi(concrete):
    c = concrete["local"]
    mpi = [n for n in c.nodes if n["name"] in ("openmpi", "mpich", "intel-oneapi-mpi", "mvapich")]
    assert len(mpi) == 1 and mpi[0]["external"], mpi
    assert Path(mpi[0]["prefix"]).is_dir(), "the detected MPI must be on this machine"
    assert c.one("mpi-pingpong")["variants"]["cuda"] is False
    osu = c.one("osu-micro-benchmarks")
    assert osu["version"] == "7.5.1" and osu["variants"]["cuda"] is False
    assert "cuda" not in c.names()


@pytest.mark.parametrize("env", ENVS)
def test_one_node_each_of_the_comm_stack(concrete, env):
    names = concrete[env].names()
    mpi = [n for n in names if n in ("openmpi", "mpich", "cray-mpich", "intel-oneapi-mpi", "mvapich")]
    assert len(mpi) == (0 if env == "images/comm-fwk" else 1), f"{env}: MPI nodes {mpi}"
    for pkg in ("libfabric", "ucx", "cuda", "nccl"):
        assert names.count(pkg) <= 1, f"{env}: {names.count(pkg)} {pkg} nodes"


@pytest.mark.parametrize("env", LOCKED)
def test_lock_has_not_drifted(concrete, env):
    committed = TOP / env_dir(env) / "spack.lock"
    assert committed.exists(), f"{committed.relative_to(TOP)} missing: run bin/commstack lock {env}"
    diff = lock_diff(committed, concrete[env].lock)
    assert not diff, (f"{env}: re-concretizing changed the DAG (bin/commstack lock {env} to accept):\n"
                      + "\n".join(diff))


def test_lock_diff_names_what_changed(concrete, tmp_path):
    """The drift report names the spec that moved and how: version, variants, dependencies."""
    lock = json.loads(concrete["gh200-ompi"].lock.read_text())
    specs = lock["concrete_specs"]
    h = next(h for h, s in specs.items() if s["name"] == "gdrcopy")
    specs[h]["version"] = "2.4.4"
    ucx = next(s for s in specs.values() if s["name"] == "ucx")
    ucx["parameters"]["thread_multiple"] = False
    ucx["dependencies"] = [d for d in ucx["dependencies"] if specs[d["hash"]]["name"] != "gdrcopy"]
    edited = tmp_path / "spack.lock"
    edited.write_text(json.dumps(lock))
    diff = lock_diff(edited, concrete["gh200-ompi"].lock)
    assert [d.split(" (hash")[0] for d in diff] == [
        "~ gdrcopy: version 2.4.4 -> 2.5.1",
        "~ ucx: thread_multiple=False -> True, now depends on gdrcopy"]
    assert diff[0].endswith(f"(hash {h[:7]} -> {h[:7]})")  # the hash alone is not what moved


@pytest.mark.parametrize("env", LOCKED)
def test_committed_lock_pairs_each_root_with_its_spec(spack, tmp_path, env):
    """Each root of the committed lock points at the package, version and variants it asks for
    (a concretization-cache answer once paired the root openmpi with nccl-tests' spec)."""
    copy = stage(tmp_path) / env_dir(env)
    shutil.copy(TOP / env_dir(env) / "spack.lock", copy / "spack.lock")
    assert len(json.loads((copy / "spack.lock").read_text())["roots"]) >= 3
    assert root_mismatches(spack, copy) == []


def test_a_swapped_root_is_caught(spack, tmp_path):
    copy = stage(tmp_path) / env_dir("gh200-cray")
    lock = json.loads((TOP / env_dir("gh200-cray") / "spack.lock").read_text())
    lock["roots"][0]["hash"], lock["roots"][1]["hash"] = lock["roots"][1]["hash"], lock["roots"][0]["hash"]
    (copy / "spack.lock").write_text(json.dumps(lock))
    wrong = root_mismatches(spack, copy)
    assert len(wrong) == 2 and wrong[0].startswith(lock["roots"][0]["spec"].split()[0].split("+")[0])


#: what `spack external find` writes on an Ubuntu 22.04 workstation with gcc 11 and clang 14: the
#: other host's compilers and tools (this machine's are .spack/externals.yaml, Debian 12's gcc 12)
OTHER_HOST_EXTERNALS = """\
packages:
  gcc:
    externals:
    - spec: gcc@11.4.0 languages:='c,c++,fortran'
      prefix: /usr
      extra_attributes:
        compilers: {c: /usr/bin/gcc-11, cxx: /usr/bin/g++-11, fortran: /usr/bin/gfortran-11}
  llvm:
    externals:
    - spec: llvm@14.0.0+clang~flang~lld~lldb
      prefix: /usr/lib/llvm-14
      extra_attributes:
        compilers: {c: /usr/lib/llvm-14/bin/clang, cxx: /usr/lib/llvm-14/bin/clang++}
  openmpi:
    externals:
    - spec: openmpi@4.1.2
      prefix: /usr
  cmake:
    externals:
    - spec: cmake@3.22.1
      prefix: /usr
  python:
    externals:
    - spec: python@3.10.12
      prefix: /usr
"""


def link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)


def spack_of_a_host(spack: Spack, where: Path, site_packages: str) -> Spack:
    """The same Spack release as installed on another host: its files (hard links; bin/spack finds its
    prefix by its own path), its own site scope ($spack/etc/spack/site, where a site's
    `spack compiler find --scope site` writes) and its own, empty, install tree."""
    prefix = where / "spack"
    shutil.copytree(spack.exe.resolve().parents[1], prefix, copy_function=link_or_copy,
                    ignore=shutil.ignore_patterns("opt", "var", "__pycache__", ".git"))
    site = prefix / "etc" / "spack" / "site" / "packages.yaml"
    site.unlink(missing_ok=True)  # a new file, never a write through a link into the real Spack
    site.write_text(site_packages)
    return Spack(prefix / "bin" / "spack", where / "logs")


@pytest.mark.parametrize("env", ("gh200-ompi", "gh200-cray"))
def test_two_differently_set_up_hosts_lock_alike(spack, tmp_path, env):
    """Two hosts whose Spack knows different compilers and tools (this Debian 12 machine's gcc 12 and
    externals as detected here; an Ubuntu 22.04 host's gcc 11 and clang 14) and has a different
    install tree each concretize the env as `bin/commstack lock` does: both give the committed lock."""
    here = (TOP / ".spack" / "externals.yaml").read_text()
    assert "gcc:" in here, "bin/commstack setup detects this machine's compiler"
    for host, site in (("this-host", here), ("ubuntu-host", OTHER_HOST_EXTERNALS)):
        other = spack_of_a_host(spack, tmp_path / host, site)
        # the set-up differs where commstack's Spack runs read it: the site's compiler is seen
        seen = other("config", "get", "packages", extra_env={"SPACK_DISABLE_LOCAL_CONFIG": "1"}).stdout
        assert ("gcc@12" if host == "this-host" else "gcc@11.4.0") in seen, seen
        c = concretize_all(other, [env], stage(tmp_path / host / "staged"))[env]
        diff = lock_diff(TOP / env_dir(env) / "spack.lock", c.lock)
        assert diff == [], f"{env} on {host} differs from the committed lock:\n" + "\n".join(diff)
        assert {n["os"] for n in c.nodes} == {OS[env]}


def test_a_pin_for_an_unknown_package_is_refused(spack, tmp_path):
    """Spack ignores config for a name it does not know: a typo in a pin would silently unpin."""
    staged = stage(tmp_path)
    pins = staged / "envs" / "common" / "pins.yaml"
    pins.write_text(pins.read_text() + '  opnmpi:\n    require:\n    - "@5.0.8"   # a typo\n')
    with pytest.raises(EnvError) as e:
        concretize_all(spack, ["gh200-cray"], staged)
    assert str(e.value).startswith("env gh200-cray: concretization failed")
    assert "packages config names unknown package(s): 'opnmpi'" in str(e.value)
    assert "envs/common/pins.yaml:" in str(e.value)  # the line at fault, quoted


def test_an_unknown_env_is_a_named_error():
    with pytest.raises(ConfigError, match="unknown env 'gh200-nope'; known: local, gh200-ompi, gh200-cray, alps-login"):
        env_dir("gh200-nope")


@pytest.mark.parametrize("env", ENVS)
def test_audit_configs(spack, staged, env):
    proc = spack("audit", "configs", env_dir=staged / env_dir(env), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
