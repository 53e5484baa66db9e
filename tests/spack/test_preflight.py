"""Spack tier: `bin/commstack preflight` finds the externals this machine has and those it lacks."""

import pytest

from commstack.spack.envs import stage
from commstack.spack.preflight import preflight

pytestmark = pytest.mark.spack


def by_name(checks):
    return {c.name: c for c in checks}


def test_local_externals_are_all_here(spack, staged):
    checks = by_name(preflight(spack, staged))
    assert "gcc" in checks and ("openmpi" in checks or "mpich" in checks)
    assert all(not c.problems for c in checks.values()), [c.line() for c in checks.values() if c.problems]
    mpi = checks.get("openmpi") or checks["mpich"]
    assert mpi.found and mpi.claims.lstrip("@=") in mpi.found  # detection at the prefix agrees


def test_cray_externals_are_not_on_this_machine(spack, concrete):
    checks = by_name(preflight(spack, concrete["gh200-cray"].copy))  # its concrete DAG's externals
    for name, prefix in (("cray-mpich", "/opt/cray/pe/mpich/"), ("libfabric", "/opt/cray/libfabric/1.22.0")):
        assert any(p.startswith(f"prefix {prefix}") and p.endswith("does not exist") for p in checks[name].problems)
    assert "module cray-mpich/8.1.30: no module command here to check it" in checks["cray-mpich"].problems


def test_a_wrong_version_claim_is_reported(spack, tmp_path):
    copy = stage(tmp_path)
    externals = copy / ".spack" / "externals.yaml"
    text = externals.read_text()
    real = next(line.split("@")[1].split()[0].split("~")[0].split("+")[0]
                for line in text.splitlines() if "spec: openmpi@" in line)
    externals.write_text(text.replace(f"spec: openmpi@{real}", "spec: openmpi@3.0.0"))
    checks = by_name(preflight(spack, copy))
    assert checks["openmpi"].problems == [f"claims @3.0.0, /usr has {real}"]
