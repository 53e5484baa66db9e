"""The x86-ompi stack as built here (ci/build-stack.sh, docs/building.md): what its binaries said about
themselves, recorded by ci/record-stack.sh into tests/data/stack/ (x86-ompi-cuda13's: tests/data/stack/cuda13/). Each file is a real command's output
and ends with its exit status; every line is read, and one of no known form fails the reading."""

import re
from pathlib import Path

import pytest

from commstack.paths import TOP

DATA = TOP / "tests" / "data" / "stack"
CUDA13 = DATA / "cuda13"


def output(name: str, data: Path = DATA) -> list[str]:
    """The recorded lines of a command, which exited 0."""
    lines = (data / name).read_text().splitlines()
    assert lines[-1] == "exit 0", f"{name}: {lines[-1]}"
    return lines[:-1]


def fi_providers(lines: list[str]) -> dict[str, str]:
    """`fi_info -l`: 'name:' then '    version: N', pair by pair."""
    providers = {}
    for name, version in zip(lines[::2], lines[1::2], strict=True):
        m, v = re.fullmatch(r"(\w+):", name), re.fullmatch(r" {4}version: (\d+\.\d+)", version)
        assert m and v, f"fi_info -l: unknown lines {name!r}, {version!r}"
        providers[m[1]] = v[1]
    return providers


def test_libfabric_is_1_22_0_with_the_twins_providers():
    assert "libfabric: 1.22.0" in output("fi_info--version.txt")
    providers = fi_providers(output("fi_info-l.txt"))
    assert {"tcp", "shm", "sockets"} <= set(providers) and "cxi" not in providers   # fabrics:=shm,tcp,sockets
    assert set(providers.values()) == {"122.0"}


def test_fi_info_reading_is_strict():
    with pytest.raises(AssertionError, match="unknown lines"):
        fi_providers(["tcp:", "    version: 122.0", "verbs", "    version: 122.0"])


def test_ucx_is_1_19_0_configured_with_cuda_and_gdrcopy():
    lines = output("ucx_info-v.txt")
    assert lines[0] == "# Library version: 1.19.0"
    configured = next(line for line in lines if line.startswith("# Configured with: ")).split()
    assert "--with-cuda=/opt/commstack/cuda-12.8.1" in configured   # the wheel toolkit (ci/cuda-wheels.py)
    assert any(a.startswith("--with-gdrcopy=") and "gdrcopy-2.5.1-" in a for a in configured)
    assert "--enable-mt" in configured   # +thread_multiple, which openmpi@5 needs


def test_ucx_cuda_modules_are_built_and_wait_for_a_driver():
    """The CUDA transports are built; with no GPU driver here they do not load (libcuda.so.1), so
    `ucx_info -d` lists the host transports only: what a GPU node adds is cuda_copy, cuda_ipc, gdr_copy."""
    modules = set(output("ucx-modules.txt"))
    assert {"libuct_cuda.so", "libuct_cuda_gdrcopy.so", "libucm_cuda.so"} <= modules
    failed = output("ucx_info-d-debug-cuda.txt")
    assert failed and all(re.search(r"UCX {2}DEBUG dlopen\('.*/lib/ucx/libuct_cuda\.so\.0', mode=0x1\) failed: "
                                    r"libcuda\.so\.1: cannot open shared object file", line) for line in failed)
    transports = [line.split(": ")[1] for line in output("ucx_info-d.txt") if line.startswith("#      Transport: ")]
    assert set(transports) == {"self", "tcp", "sysv", "posix"}, transports


BUILT = re.compile(r"(?P<name>[\w-]+) +(?P<version>[\d.]+) +(?P<seconds>\d+) +(?P<mib>[\d.]+)  (?P<phases>.*)")


def build_times(data: Path = DATA) -> tuple[dict[str, dict], list[str]]:
    """perf/build_times.py's table: a header, a row per built package, the total, what is not installed."""
    lines = (data / "build-times.txt").read_text().splitlines()
    assert lines[0].split() == ["package", "version", "wall", "s", "MiB", "phases", "(s)"], lines[0]
    rows, missing, total = {}, [], None
    for line in lines[1:]:
        if line.startswith("total "):
            total = line.split()
        elif line.startswith("not installed: "):
            missing = line.removeprefix("not installed: ").split(", ")
        else:
            m = BUILT.fullmatch(line)
            assert m, f"build-times.txt: unknown line {line!r}"
            rows[m["name"]] = m.groupdict()
    # the total of the unrounded times: within half a second per row of the rounded sum
    assert total and abs(int(total[1]) - sum(int(r["seconds"]) for r in rows.values())) <= len(rows), total
    return rows, missing


MCA = re.compile(r" *MCA (?P<framework>\w+): (?P<component>\w+) \(MCA v[\d.]+, API v[\d.]+, Component v(?P<version>[\d.]+)\)")


NOT_LOADED = re.compile(r"\[[\w.-]+:\d+\] mca_base_component_repository_open: unable to open mca_(\w+): "
                        r"libcuda\.so\.1: cannot open shared object file: No such file or directory \(ignored\)")


def ompi_info(lines: list[str]) -> tuple[dict[str, str], set[tuple[str, str]], list[str]]:
    """`ompi_info`: 'key: value' lines, 'MCA framework: component (...)' lines, and the components that
    did not load for want of a driver (stderr); any other line is an error."""
    fields, components, not_loaded = {}, set(), []
    for line in lines:
        if m := MCA.fullmatch(line):
            assert m["version"] == "5.0.8", line
            components.add((m["framework"], m["component"]))
        elif m := NOT_LOADED.fullmatch(line):
            not_loaded.append(m[1])
        elif m := re.fullmatch(r" *([^\[ ][^:]*?): (.*)", line):
            fields.setdefault(m[1], m[2])
        else:
            raise AssertionError(f"ompi_info: unknown line {line!r}")
    return fields, components, not_loaded


def test_ompi_info_shows_cuda_ofi_and_ucx():
    fields, components, not_loaded = ompi_info(output("ompi_info.txt"))
    assert fields["Open MPI"] == "5.0.8"   # no rc3: the tag's pre-release suffix stripped (ci/build-stack.sh)
    assert {("btl", "ofi"), ("mtl", "ofi"), ("pml", "ucx"), ("osc", "ucx"), ("btl", "smcuda"), ("coll", "cuda")} <= components
    assert "cuda" in fields["MPI extensions"].split(", ")
    configured = fields["Configure command line"].split()
    assert "'--with-cuda=/opt/commstack/cuda-12.8.1'" in configured and "'--enable-oshmem'" in configured
    assert "'--with-cuda-libdir=/opt/commstack/cuda-12.8.1/lib64/stubs'" in configured
    # linked against the stub libcuda: the CUDA accelerator loads on a GPU node's driver, not here
    assert not_loaded == ["accelerator_cuda", "rcache_gpusm", "rcache_rgpusm"]
    assert ("accelerator", "null") in components and ("accelerator", "cuda") not in components


def test_ompi_info_reading_is_strict():
    with pytest.raises(AssertionError, match="unknown line"):
        ompi_info(["                Open MPI: 5.0.8", "[vm:1] something else"])
def test_osu_7_5_1_has_the_cuda_options():
    """Built `+cuda ~cuda_kernels` (--enable-cuda=basic): `-d cuda` is there. It links libcuda.so.1 (seed 000),
    so it starts only where a driver is: the usage text was taken with the link stubs standing in."""
    assert "libcuda.so.1: cannot open shared object file" in (DATA / "osu_latency-h-no-driver.txt").read_text()
    lines = output("osu_latency-h.txt")
    assert lines[0] == "Usage: osu_latency [options] [SRC DST]"
    accelerator = [line for line in lines if line.lstrip().startswith("-d, --accelerator")]
    assert accelerator and "cuda" in accelerator[0], lines


def test_every_package_of_the_twin_built_here_but_nccl_tests():
    rows, missing = build_times()
    assert {"openmpi", "pmix", "prrte", "hwloc", "libfabric", "ucx", "gdrcopy", "osu-micro-benchmarks"} <= set(rows)
    assert (rows["openmpi"]["version"], rows["ucx"]["version"], rows["libfabric"]["version"]) == ("5.0.8", "1.19.0", "1.22.0")
    assert "nccl-tests" in missing   # every nccl-tests test is a .cu file: no nvcc here (docs/building.md)


def spack_find(data: Path) -> dict[str, str]:
    """`spack find -lv` of an env: each package's `name@version+variants ...` line of the long listing."""
    found = {}
    for line in (data / "spack-find.txt").read_text().splitlines():
        if m := re.fullmatch(r"[a-z0-9]{7} ([\w-]+)@(\S+ .*)", line):
            found[m[1]] = m[2]
    return found


def test_every_package_of_the_cuda13_twin_is_built_here():
    """x86-ompi-cuda13 (CUDA 13.0.2 from the cu13 wheels, nvcc 13.0.88): all 13 packages of the stack, nccl-tests
    and OSU's CUDA kernels included, none missing (docs/building.md)."""
    rows, missing = build_times(CUDA13)
    assert missing == [] and {"nccl-tests", "osu-micro-benchmarks", "gdrcopy", "aws-ofi-nccl", "openmpi", "ucx",
                              "libfabric", "pmix", "prrte", "hwloc", "mpi-pingpong"} <= set(rows)
    assert rows["nccl-tests"]["version"] == "2.17.1" and rows["osu-micro-benchmarks"]["version"] == "7.5.1"
    assert output("nvcc--version.txt", CUDA13)[-2:] == ["Cuda compilation tools, release 13.0, V13.0.88",
                                                        "Build cuda_13.0.r13.0/compiler.36424714_0"]
    found = spack_find(CUDA13)
    assert found["cuda"].startswith("13.0.2") and found["nccl"].startswith("2.27.7-1")
    assert "+cuda+cuda_kernels" in found["osu-micro-benchmarks"] and "+cuda+exes" in found["gdrcopy"]
    assert "cudart=static" in found["aws-ofi-nccl"] and re.match(r"2\.17\.1\+cuda\+mpi ", found["nccl-tests"])


def test_the_cuda13_twins_ucx_and_open_mpi_are_built_against_cuda_13():
    ucx = next(line for line in output("ucx_info-v.txt", CUDA13) if line.startswith("# Configured with: ")).split()
    assert "--with-cuda=/opt/commstack/cuda-13.0.2" in ucx
    fields, components, not_loaded = ompi_info(output("ompi_info.txt", CUDA13))
    assert fields["Open MPI"] == "5.0.8" and "'--with-cuda=/opt/commstack/cuda-13.0.2'" in fields["Configure command line"].split()
    assert {("btl", "smcuda"), ("coll", "cuda"), ("pml", "ucx")} <= components
    assert not_loaded == ["accelerator_cuda", "rcache_gpusm", "rcache_rgpusm"]   # no driver here


def test_the_cuda13_twins_osu_has_its_cuda_kernels():
    """+cuda_kernels: util/kernel.cu compiled by nvcc into every benchmark (osu_allreduce -c -d cuda validates
    on the device with them); x86-ompi's OSU has none (--enable-cuda=basic)."""
    lines = output("osu-cuda-kernels.txt", CUDA13)
    assert [line.split()[1:] for line in lines[:-1]] == [["T", "call_empty_kernel"], ["T", "call_kernel"],
                                                          ["T", "call_touch_managed_kernel_add"],
                                                          ["T", "call_touch_managed_kernel_sub"]]
    assert lines[-1] == ".nv_fatbin"
