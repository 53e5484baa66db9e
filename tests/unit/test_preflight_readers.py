"""The version readers of `bin/commstack preflight`, on real outputs (tests/data/preflight/index.yaml),
without Spack: a version found, a changed line refused by name, a prefix with nothing found."""

import shutil
from pathlib import Path

import pytest
import yaml

from commstack.spack.preflight import (ExternalCheck, VersionReadError, agrees, check_version, parse_ldd,
                                       parse_nccl_header, parse_nvcc, parse_sinfo, parse_ucx_info, read_cuda,
                                       read_glibc, read_nccl, read_slurm)

DATA = Path(__file__).parents[1] / "data" / "preflight"
INDEX = yaml.safe_load((DATA / "index.yaml").read_text())
PARSERS = {"ldd-version": parse_ldd, "sinfo-V": parse_sinfo, "ptxas-version": parse_nvcc,
           "nccl-2.25.1": parse_nccl_header, "ucx_info-v": parse_ucx_info}


def parser(name: str):
    return next(p for prefix, p in PARSERS.items() if name.startswith(prefix))


@pytest.mark.parametrize("name", INDEX)
def test_recorded_outputs_give_their_version(name):
    got = parser(name)((DATA / name).read_text())
    assert (list(got) if isinstance(got, tuple) else got) == INDEX[name]["version"]


@pytest.mark.parametrize("name, line, message", [
    ("ldd-version.debian12.stdout", 0, "ldd --version: unknown first line 'ldd (Debian GLIBC 2.36-9+deb12u14) two'"),
    ("ldd-version.debian12.stdout", 4, "ldd --version: unknown line 'Written by Roland McGrath and Ulrich two'"),
    ("sinfo-V.debian12.stdout", 0, "sinfo -V: unknown first line 'slurm-wlm two'"),
    ("ptxas-version.cuda12.8.stdout", 3, "nvcc --version: unknown line 'Cuda compilation tools, release 12.8, two'"),
    ("ucx_info-v.debian12.stdout", 0, "ucx_info -v: unknown first line '# Version two'"),
    ("ucx_info-v.debian12.stdout", 1, "ucx_info -v: unknown line \"# Git branch '<unknown>', revision two\""),
])
def test_a_changed_line_is_quoted(name, line, message):
    lines = (DATA / name).read_text().splitlines()
    lines[line] = lines[line].rsplit(" ", 1)[0] + " two"
    with pytest.raises(VersionReadError) as e:
        parser(name)("\n".join(lines) + "\n")
    assert str(e.value) == message


def test_sinfo_errors_are_not_a_version():
    # what sinfo -V printed here with no slurm.conf and no DNS SRV record (stderr; exit 1)
    text = ("sinfo: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
            "sinfo: fatal: Could not establish a configuration source\n")
    with pytest.raises(VersionReadError, match="sinfo -V: one line expected, got 2"):
        parse_sinfo(text)


def test_a_header_without_the_patch_level_is_refused():
    text = (DATA / "nccl-2.25.1.h").read_text().replace("#define NCCL_PATCH 1\n", "")
    with pytest.raises(VersionReadError, match="nccl.h: 0 '#define NCCL_PATCH' lines, one expected"):
        parse_nccl_header(text)


@pytest.mark.parametrize("claim, found, same", [
    ("=2.39", "2.36", False), ("=2.36", "2.36", True), ("=24.05.5", "22.05.8", False),
    ("=2.25.1-1", "2.25.1", True), ("=2.25.1-1", "2.26.2", False),  # nccl.h has no package release
    ("=12.8.1", "12.8", True), ("=12.8.1", "12.6", False),          # nvcc gives the release
    ("=13.3.0", "12.2.0", False), ("3.0.0", "3.0.0", True)])
def test_agrees(claim, found, same):
    assert agrees(claim, found) is same


def test_nccl_from_a_wheel_layout_prefix(tmp_path):
    (tmp_path / "include").mkdir()
    shutil.copy(DATA / "nccl-2.25.1.h", tmp_path / "include" / "nccl.h")
    found = read_nccl(tmp_path)
    assert (found.version, found.source) == ("2.25.1", str(tmp_path / "include" / "nccl.h"))


def test_nothing_found_is_a_failure_with_expected_and_found(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libnccl.so.2").write_bytes(b"\x7fELF no banner")
    checks = {n: ExternalCheck(n, v, str(tmp_path), [], [], None) for n, v in
              (("nccl", "=2.25.1-1"), ("glibc", "=2.39"), ("slurm", "=24.05.5"), ("openmpi", "=5.0.8"))}
    for c in checks.values():
        check_version(c, [] if c.name == "openmpi" else None)
    assert checks["nccl"].problems == [
        f"expected 2.25.1-1, found none: no {tmp_path}/include/nccl.h, and no libnccl.so* under "
        f"{tmp_path}/{{lib,lib64,lib/*-linux-gnu}} with a version banner"]
    assert checks["glibc"].problems == [f"expected 2.39, found none: no {tmp_path}/bin/ldd"]
    assert checks["slurm"].problems == [f"expected 24.05.5, found none: no {tmp_path}/bin/sinfo"]
    assert checks["openmpi"].problems == [f"expected 5.0.8, found none: Spack's detection of openmpi at {tmp_path}"]
    assert checks["glibc"].line() == (f"glibc@=2.39 at {tmp_path}: FAIL: expected 2.39, "
                                      f"found none: no {tmp_path}/bin/ldd")


def test_this_hosts_glibc_and_slurm(monkeypatch):
    """The host's own tools, as preflight runs them: sinfo -V answers with no Slurm configured here
    (Spack's slurm detection runs `srun --version`, which fails without one, and found nothing)."""
    monkeypatch.delenv("SLURM_CONF", raising=False)
    glibc = read_glibc(Path("/usr"))
    assert glibc.source == "/usr/bin/ldd --version" and glibc.version.count(".") >= 1
    if shutil.which("sinfo") != "/usr/bin/sinfo":
        pytest.skip("no /usr/bin/sinfo on this host")
    slurm = read_slurm(Path("/usr"))
    assert slurm.source == "/usr/bin/sinfo -V" and slurm.version.count(".") == 2


def test_cuda_release_from_the_toolkit_banner(tmp_path):
    """read_cuda runs PREFIX/bin/nvcc --version; the venv's CUDA 12.8 wheel has no nvcc driver, so its
    ptxas, which prints the same toolkit banner, stands in for it under that name."""
    import nvidia.cuda_nvcc
    ptxas = Path(nvidia.cuda_nvcc.__path__[0]) / "bin" / "ptxas"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").symlink_to(ptxas)
    found = read_cuda(tmp_path)
    assert (found.version, found.source) == ("12.8", f"{tmp_path}/bin/nvcc --version: release 12.8, V12.8.93")
    c = ExternalCheck("cuda", "=12.8.1", str(tmp_path), [], [], None)
    check_version(c, None)
    assert c.line() == f"cuda@=12.8.1 at {tmp_path}: ok (found 12.8: {found.source})"
    c = ExternalCheck("cuda", "=12.6.3", str(tmp_path), [], [], None)
    check_version(c, None)
    assert c.problems == [f"expected 12.6.3, found 12.8 ({found.source})"]


def test_an_empty_library_is_no_version(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libnccl.so.2").write_bytes(b"")
    assert read_nccl(tmp_path).version is None


def test_cray_mpich_from_the_cray_pe_layout(tmp_path):
    """cray-mpich's version is the Cray PE directory its library is in; elsewhere, or without the
    library, nothing is found, which preflight reports as a failure."""
    prefix = tmp_path / "opt/cray/pe/mpich/8.1.30/ofi/gnu/12.3"
    (prefix / "lib").mkdir(parents=True)
    c = ExternalCheck("cray-mpich", "=8.1.30", str(prefix), [], [], None)
    check_version(c, None)
    assert c.problems == [f"expected 8.1.30, found none: no libmpi*.so in {prefix}/lib"]
    (prefix / "lib" / "libmpi_gnu_123.so.12").write_bytes(b"\x7fELF")
    c = ExternalCheck("cray-mpich", "=8.1.30", str(prefix), [], [], None)
    check_version(c, None)
    assert (c.problems, c.found) == ([], ["8.1.30"])
    assert c.line().endswith(f"ok (found 8.1.30: the Cray PE directory of {prefix}, holding lib/libmpi_gnu_123.so.12)")
    older = ExternalCheck("cray-mpich", "=8.1.31", str(prefix), [], [], None)
    check_version(older, None)
    assert older.problems == [f"expected 8.1.31, found 8.1.30 (the Cray PE directory of {prefix}, "
                              "holding lib/libmpi_gnu_123.so.12)"]
    elsewhere = ExternalCheck("cray-mpich", "=8.1.30", str(tmp_path), [], [], None)
    check_version(elsewhere, None)
    assert elsewhere.problems == [f"expected 8.1.30, found none: {tmp_path} is not in the Cray PE's layout "
                                  ".../mpich/VERSION/ofi/COMPILER/CVERSION"]
