"""Spack tier: `bin/commstack preflight` finds the externals this machine has and those it lacks,
and the versions it has: a version nobody could read is a failure, never ok."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from commstack.paths import TOP
from commstack.spack import RECORDED_ROOT
from commstack.spack.envs import stage
from commstack.spack.preflight import preflight, read_glibc, read_slurm

pytestmark = pytest.mark.spack


def by_name(checks):
    return {c.name: c for c in checks}


def test_local_externals_are_all_here(spack, staged):
    checks = by_name(preflight(spack, staged))
    assert "gcc" in checks and ("openmpi" in checks or "mpich" in checks)
    assert all(not c.problems for c in checks.values()), [c.line() for c in checks.values() if c.problems]
    mpi = checks.get("openmpi") or checks["mpich"]
    assert mpi.found and mpi.claims.lstrip("@=") in mpi.found  # detection at the prefix agrees


def test_gh200_ompi_on_this_host_names_what_differs(spack):
    """The command a user types, on this x86_64 Debian host: the image userland's glibc, NCCL and
    Slurm are not this machine's, and each line says what was expected and what was found."""
    # a new shell after `bin/commstack setup` (issue 36 item 5): no SPACK_ROOT, no spack on PATH; the checkout
    # remembers its Spack. A tier run on SPACK_ROOT alone, with no setup in this checkout, keeps SPACK_ROOT
    # (tests/unit/test_setup.py checks that setup records it)
    shell = dict(os.environ)
    if RECORDED_ROOT.is_file():
        shell.pop("SPACK_ROOT", None)
        shell["PATH"] = ":".join(d for d in shell["PATH"].split(":") if not (Path(d) / "spack").exists())
    proc = subprocess.run([str(TOP / "bin" / "commstack"), "preflight", "gh200-ompi"], capture_output=True,
                          text=True, timeout=900, env=shell)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = {line.split("@")[0].strip(): line.strip() for line in proc.stdout.splitlines() if "@=" in line}
    glibc, slurm = read_glibc(Path("/usr")), read_slurm(Path("/usr"))
    assert lines["glibc"] == f"glibc@=2.39 at /usr: FAIL: expected 2.39, found {glibc.version} ({glibc.source})"
    assert lines["nccl"].startswith("nccl@=2.25.1-1 at /usr: FAIL: expected 2.25.1-1, found none: "
                                    "no /usr/include/nccl.h")
    found = f"{slurm.version} ({slurm.source})" if slurm.version else f"none: {slurm.source}"
    assert lines["slurm"] == f"slurm@=24.05.5 at /usr: FAIL: expected 24.05.5, found {found}"
    assert "glibc" in proc.stdout.splitlines()[-1] and "nccl" in proc.stdout.splitlines()[-1]


def test_cray_externals_are_not_on_this_machine(spack, concrete):
    checks = by_name(preflight(spack, concrete["gh200-cray"].copy))  # its concrete DAG's externals
    for name, prefix in (("cray-mpich", "/opt/cray/pe/mpich/"), ("libfabric", "/opt/cray/libfabric/1.22.0")):
        assert any(p.startswith(f"prefix {prefix}") and p.endswith("does not exist") for p in checks[name].problems)
    assert "module cray-mpich/8.1.30: no module command here to check it" in checks["cray-mpich"].problems
    nccl = checks["nccl"]  # the HPC SDK's, beside the cuda external
    assert nccl.problems == ["prefix /opt/nvidia/hpc_sdk/Linux_aarch64/25.3/comms/nccl does not exist"]


def test_alps_login_checks_the_node_sles_packages(spack):
    """`bin/commstack preflight alps-login`: SLES's perl, openssh and openssl, externals of its lock,
    are each read at /usr by Spack's detection and pass only at the version the env claims."""
    proc = subprocess.run([str(TOP / "bin" / "commstack"), "preflight", "alps-login"], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == (1 if "FAIL" in proc.stdout else 0), proc.stdout + proc.stderr
    lines = {line.split("@")[0].strip(): line.strip() for line in proc.stdout.splitlines() if "@=" in line}
    for name, claim in (("perl", "5.26.1"), ("openssh", "9.6p1"), ("openssl", "3.1.4")):
        m = re.fullmatch(rf"{name}@={re.escape(claim)} at /usr: (?:ok \(found (.+?): .*\)|FAIL: expected "
                         rf"{re.escape(claim)}, found (?:none: .*|(.+?) \(Spack's detection of {name} at /usr\)))",
                         lines[name])
        assert m, lines[name]
        if m[1] or m[2]:  # a version read there: ok exactly when it is the claimed one
            assert any(v.startswith(claim) for v in (m[1] or m[2]).split(", ")) == bool(m[1]), lines[name]


def test_a_wrong_version_claim_is_reported(spack, tmp_path):
    copy = stage(tmp_path)
    externals = copy / ".spack" / "externals.yaml"
    text = externals.read_text()
    real = next(line.split("@")[1].split()[0].split("~")[0].split("+")[0]
                for line in text.splitlines() if "spec: openmpi@" in line)
    externals.write_text(text.replace(f"spec: openmpi@{real}", "spec: openmpi@3.0.0"))
    checks = by_name(preflight(spack, copy))
    assert checks["openmpi"].problems == [f"expected 3.0.0, found {real} (Spack's detection of openmpi at /usr)"]


def test_an_external_spack_cannot_find_fails(spack, tmp_path):
    """A prefix that exists but holds no such package: Spack's detection finds nothing, and that fails."""
    copy = stage(tmp_path)
    externals = copy / ".spack" / "externals.yaml"
    empty = tmp_path / "empty-prefix"
    (empty / "bin").mkdir(parents=True)
    conf = yaml.safe_load(externals.read_text())
    conf["packages"]["libfabric"] = {"externals": [{"spec": "libfabric@1.22.0", "prefix": str(empty)}]}
    externals.write_text(yaml.safe_dump(conf))
    checks = by_name(preflight(spack, copy))
    assert checks["libfabric"].problems == [
        f"expected 1.22.0, found none: Spack's detection of libfabric at {empty}"]


INSTALL = """
import sys
from pathlib import Path
from commstack.spack.install import SpackInstallError, install
try:
    install("osu-micro-benchmarks", Path(sys.argv[1]))
except SpackInstallError as e:
    sys.exit(f"error: {e}")
"""


def test_install_stops_at_a_missing_external(spack, tmp_path):
    """Where commstack installs in the local env (`run` without an OSU), an external whose prefix is
    gone is named, with the preflight command, before Spack builds anything on top of it."""
    copy = stage(tmp_path / "copy")
    externals = copy / ".spack" / "externals.yaml"
    text = externals.read_text()
    line = next(line for line in text.splitlines() if "spec: openmpi@" in line)
    version = re.match(r"[\d.]+", line.split("@")[1]).group(0)
    prefix_line = text.splitlines()[text.splitlines().index(line) + 1]
    assert prefix_line.strip() == "prefix: /usr", prefix_line
    gone = tmp_path / "uninstalled-openmpi"
    externals.write_text(text.replace(f"{line}\n{prefix_line}", f"{line}\n{prefix_line.replace('/usr', str(gone))}"))
    log = tmp_path / "install.log"
    proc = subprocess.run([sys.executable, "-c", INSTALL, str(log)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "COMMSTACK_HOME": str(copy), "SPACK_ROOT": str(spack.exe.parents[1])})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (
        f"error: external openmpi@{version} (prefix {gone}) of the local env is not on this machine; "
        "`bin/commstack preflight local` checks every external, `bin/commstack setup --detect` detects them again")
    assert not log.exists()  # spack install never started
