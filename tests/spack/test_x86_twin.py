"""Spack tier: x86-ompi, the x86_64 twin of gh200-ompi that a Debian 12 machine builds (ci/build-stack.sh).

It must be gh200-ompi's stack: the same versions and variants of every package both hold, except
where this kind of machine differs (target, OS, cxi, the toolkit without nvcc), each named here.
"""

import pytest

pytestmark = pytest.mark.spack

#: package -> the variants in which the twin may differ from gh200-ompi, and why
DIFFERS = {
    "libfabric": {"fabrics"},           # no Slingshot here: shm,tcp,sockets for cxi,shm,tcp
    "gdrcopy": {"exes"},                # its test programs need nvcc, which the wheel toolkit lacks
    "osu-micro-benchmarks": {"cuda_kernels"},   # --enable-cuda=basic: util/kernel.cu needs nvcc
    "aws-ofi-nccl": {"cudart"},         # the wheel toolkit has libcudart.so only
}
STACK = ("openmpi", "libfabric", "ucx", "gdrcopy", "osu-micro-benchmarks", "nccl-tests", "aws-ofi-nccl",
         "mpi-pingpong", "pmix", "prrte", "hwloc", "cuda", "nccl")


def test_twin_is_built_for_debian12_x86_64(concrete):
    c = concrete["x86-ompi"]
    assert {(n["os"], n["target"]) for n in c.nodes} == {("debian12", "x86_64_v3")}
    assert c.one("glibc")["version"] == "2.36" and c.one("glibc")["external"]
    # built here: the stack; everything else is the system's (no archive can be fetched offline)
    built = sorted(n["name"] for n in c.nodes if not n["external"])
    assert built == sorted(["aws-ofi-nccl", "compiler-wrapper", "gcc-runtime", "gdrcopy", "hwloc", "libfabric",
                            "mpi-pingpong", "nccl-tests", "openmpi", "osu-micro-benchmarks", "pmix", "prrte", "ucx"])
    cuda, nccl = c.one("cuda"), c.one("nccl")
    assert (cuda["version"], cuda["prefix"]) == ("12.8.1", "/opt/commstack/cuda-12.8.1")   # ci/cuda-wheels.py
    assert (nccl["version"], nccl["prefix"]) == ("2.25.1-1", "/opt/commstack/nccl-2.25.1")


def test_twin_has_the_pins_of_gh200_ompi(concrete):
    twin, gh200 = concrete["x86-ompi"], concrete["gh200-ompi"]
    for name in STACK:
        a, b = twin.one(name), gh200.one(name)
        assert a["version"] == b["version"], name
        # the stack's own graph is the same; the system libraries below it are this machine's
        assert set(a["deps"]) & set(STACK) == set(b["deps"]) & set(STACK), (name, a["deps"], b["deps"])
        differ = {k for k in set(a["variants"]) | set(b["variants"]) if a["variants"].get(k) != b["variants"].get(k)}
        assert differ <= DIFFERS.get(name, set()), (name, {k: (a["variants"].get(k), b["variants"].get(k)) for k in differ})
    fabrics = twin.one("libfabric")["variants"]["fabrics"]
    assert sorted(fabrics) == ["shm", "sockets", "tcp"] and twin.one("libfabric")["variants"]["cuda"] is True
    assert twin.one("gdrcopy")["variants"]["exes"] is False and gh200.one("gdrcopy")["variants"]["exes"] is True
    assert twin.one("osu-micro-benchmarks")["variants"]["cuda"] is True
