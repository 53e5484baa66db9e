"""Spack tier: the x86_64 twins of gh200-ompi that a Debian 12 machine builds (ci/build-stack.sh): x86-ompi with
CUDA 12.8.1 and x86-ompi-cuda13 with CUDA 13.0.2, each from the wheel toolkit of ci/cuda-wheels.py.

Each must be gh200-ompi's stack: the same versions and variants of every package both hold, except
where this kind of machine differs (target, OS, cxi, the toolkit), each named here.
"""

import pytest

pytestmark = pytest.mark.spack

#: package -> the variants in which a twin may differ from gh200-ompi, and why
FABRICS = {"libfabric": {"fabrics"}}    # no Slingshot here: shm,tcp,sockets for cxi,shm,tcp
DIFFERS = {
    "x86-ompi": {
        **FABRICS,
        "gdrcopy": {"exes"},                # its test programs need nvcc, which the cu12 wheels lack
        "osu-micro-benchmarks": {"cuda_kernels"},   # --enable-cuda=basic: util/kernel.cu needs nvcc
        "aws-ofi-nccl": {"cudart"},         # the cu12 wheels have libcudart.so only
    },
    "x86-ompi-cuda13": {                    # nvcc and libcudart_static.a: the rest as gh200-ompi's
        **FABRICS,
        "osu-micro-benchmarks": {"patches"},  # cuda13-prefetch.patch: CUDA 13's cudaMemPrefetchAsync
    },
}
#: twin -> its CUDA and NCCL (version, prefix): ci/cuda-wheels.py [--toolkit 13.0.2]
TOOLKIT = {
    "x86-ompi": (("12.8.1", "/opt/commstack/cuda-12.8.1"), ("2.25.1-1", "/opt/commstack/nccl-2.25.1")),
    "x86-ompi-cuda13": (("13.0.2", "/opt/commstack/cuda-13.0.2"), ("2.27.7-1", "/opt/commstack/nccl-2.27.7")),
}
STACK = ("openmpi", "libfabric", "ucx", "gdrcopy", "osu-micro-benchmarks", "nccl-tests", "aws-ofi-nccl",
         "mpi-pingpong", "pmix", "prrte", "hwloc", "cuda", "nccl")
#: what may differ only in version: the toolkit itself
VERSIONED = {"x86-ompi": set(), "x86-ompi-cuda13": {"cuda", "nccl"}}


@pytest.mark.parametrize("twin", sorted(DIFFERS))
def test_twin_is_built_for_debian12_x86_64(concrete, twin):
    c = concrete[twin]
    assert {(n["os"], n["target"]) for n in c.nodes} == {("debian12", "x86_64_v3")}
    assert c.one("glibc")["version"] == "2.36" and c.one("glibc")["external"]
    # built here: the stack; everything else is the system's (no archive can be fetched offline)
    built = sorted(n["name"] for n in c.nodes if not n["external"])
    assert built == sorted(["aws-ofi-nccl", "compiler-wrapper", "gcc-runtime", "gdrcopy", "hwloc", "libfabric",
                            "mpi-pingpong", "nccl-tests", "openmpi", "osu-micro-benchmarks", "pmix", "prrte", "ucx"])
    cuda, nccl = c.one("cuda"), c.one("nccl")
    assert ((cuda["version"], cuda["prefix"]), (nccl["version"], nccl["prefix"])) == TOOLKIT[twin]


@pytest.mark.parametrize("twin", sorted(DIFFERS))
def test_twin_has_the_pins_of_gh200_ompi(concrete, twin):
    c, gh200 = concrete[twin], concrete["gh200-ompi"]
    for name in STACK:
        a, b = c.one(name), gh200.one(name)
        assert a["version"] == b["version"] or name in VERSIONED[twin], name
        # the stack's own graph is the same; the system libraries below it are this machine's
        assert set(a["deps"]) & set(STACK) == set(b["deps"]) & set(STACK), (name, a["deps"], b["deps"])
        differ = {k for k in set(a["variants"]) | set(b["variants"]) if a["variants"].get(k) != b["variants"].get(k)}
        assert differ <= DIFFERS[twin].get(name, set()), (name, {k: (a["variants"].get(k), b["variants"].get(k)) for k in differ})
    fabrics = c.one("libfabric")["variants"]["fabrics"]
    assert sorted(fabrics) == ["shm", "sockets", "tcp"] and c.one("libfabric")["variants"]["cuda"] is True
    assert c.one("osu-micro-benchmarks")["variants"]["cuda"] is True
    assert c.one("gdrcopy")["variants"]["exes"] is (twin == "x86-ompi-cuda13") and gh200.one("gdrcopy")["variants"]["exes"]
