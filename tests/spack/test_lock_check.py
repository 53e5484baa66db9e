"""Spack tier: `bin/commstack lock --check` on a committed lock edited by hand (and stamped by another
Spack's lockfile format): it names the env, each node and what moved, exits 1, and writes nothing."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from commstack.paths import TOP
from commstack.spack.envs import env_dir, stage

pytestmark = pytest.mark.spack


def test_a_hand_edited_lock_is_named_node_by_node(spack, tmp_path):
    copy = stage(tmp_path / "copy")
    lock_file = copy / env_dir("gh200-ompi") / "spack.lock"
    shutil.copy(TOP / env_dir("gh200-ompi") / "spack.lock", lock_file)
    lock = json.loads(lock_file.read_text())
    specs = lock["concrete_specs"]
    node = {s["name"]: h for h, s in specs.items()}
    specs[node["gdrcopy"]]["version"] = "2.4.4"                          # a version
    specs[node["ucx"]]["parameters"]["thread_multiple"] = False          # a variant
    specs[node["hwloc"]]["arch"]["platform_os"] = "debian12"             # the OS of the host that wrote it
    forged = "a" * 32                                                    # a hash, as another Spack gives
    specs[forged] = specs.pop(node["cassini-headers"])
    for s in specs.values():
        for d in s.get("dependencies", []):
            d["hash"] = forged if d["hash"] == node["cassini-headers"] else d["hash"]
    lock["_meta"]["lockfile-version"] = 5
    lock_file.write_text(json.dumps(lock, indent=1))
    before = lock_file.read_bytes()

    proc = subprocess.run([sys.executable, "-m", "commstack", "lock", "--check", "gh200-ompi"], cwd=copy,
                          capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "COMMSTACK_HOME": str(copy), "SPACK_ROOT": str(spack.exe.parents[1])})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == ("lock --check gh200-ompi: envs/gh200-ompi/spack.lock is not what its configuration gives "
                      "(5 changes, committed -> now):")
    h = {name: x[:7] for name, x in node.items()}
    assert [line.strip() for line in out[1:6]] == [
        "lockfile-version 5 -> 6 (written by another Spack)",
        f"~ cassini-headers: hash aaaaaaa -> {h['cassini-headers']} alone",
        f"~ gdrcopy: version 2.4.4 -> 2.5.1 (hash {h['gdrcopy']} -> {h['gdrcopy']})",
        f"~ hwloc: arch debian12-neoverse_v2 -> ubuntu24.04-neoverse_v2 (hash {h['hwloc']} -> {h['hwloc']})",
        f"~ ucx: thread_multiple=False -> True (hash {h['ucx']} -> {h['ucx']})"]
    assert out[6:] == ["lock --check: 1 of 1 locks stale: gh200-ompi (bin/commstack lock gh200-ompi rewrites them)"]
    assert lock_file.read_bytes() == before  # nothing written


def test_a_lock_that_is_not_json_is_named_before_solving(spack, tmp_path):
    copy = stage(tmp_path / "copy")
    lock_file = copy / env_dir("gh200-cray") / "spack.lock"
    text = (TOP / env_dir("gh200-cray") / "spack.lock").read_text()
    lock_file.write_text(text[: len(text) // 2])  # a merge gone wrong, a truncated write
    proc = subprocess.run([sys.executable, "-m", "commstack", "lock", "--check", "gh200-cray"], cwd=copy,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COMMSTACK_HOME": str(copy), "SPACK_ROOT": str(spack.exe.parents[1])})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("commstack lock: error: env gh200-cray: envs/gh200-cray/spack.lock is not a "
                                  "Spack lock: "), proc.stderr
    assert proc.stdout == ""  # nothing concretized
