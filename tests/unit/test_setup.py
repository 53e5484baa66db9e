"""bin/commstack setup, run from a copy of the harness so the repo's own .spack/ is never touched."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from commstack.paths import TOP
from commstack.spack import archive, find_spack


def harness_copy(tmp: Path, tag: str | None = None) -> Path:
    shutil.copytree(TOP / "repo", tmp / "repo")
    pins = yaml.safe_load((TOP / "toolchain.yaml").read_text())
    if tag:
        pins["spack"]["tag"] = tag
    (tmp / "toolchain.yaml").write_text(yaml.safe_dump(pins))
    return tmp


def setup(copy: Path, *args: str, spack_root: str | None = None,
          env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k != "SPACK_ROOT"}, **(env or {})}
    env["COMMSTACK_HOME"] = str(copy)
    if spack_root:
        env["SPACK_ROOT"] = spack_root
    return subprocess.run([sys.executable, "-m", "commstack", "setup", *args], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=600)


def git_tree(path: Path, *files: str) -> str:
    """A git checkout of `files` (empty) at a commit of its own: not the pinned one; returns its HEAD."""
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for f in files:
        (path / f).parent.mkdir(parents=True, exist_ok=True)
        (path / f).write_text("")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "not the pinned commit"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def test_a_spack_root_checkout_at_another_commit_is_refused(tmp_path):
    root = tmp_path / "spack"
    head = git_tree(root, "bin/spack")
    proc = setup(harness_copy(tmp_path / "copy"), spack_root=str(root))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (f"SPACK_ROOT {root}: HEAD is {head}, toolchain.yaml pins v1.1.0 = 2e907202bcc8209a6a62243aab50c179b524cc3b;"
            " check out v1.1.0 there, or use --force to go on anyway") in proc.stderr
    assert not (tmp_path / "copy" / ".spack" / "repos.yaml").exists()


def test_a_packages_checkout_at_another_commit_is_refused(tmp_path):
    tree = tmp_path / "spack-packages"
    head = git_tree(tree, "repos/spack_repo/builtin/repo.yaml")
    proc = setup(harness_copy(tmp_path / "copy"), "--packages", str(tree))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (f"--packages {tree}: HEAD is {head}, toolchain.yaml pins v2025.11.0 = 119680aeee; check out v2025.11.0 "
            "there, or use --force to go on anyway") in proc.stderr
    assert "cloning" not in proc.stdout  # refused before anything is fetched


def test_offline_setup_names_the_two_ways_out(tmp_path):
    copy = harness_copy(tmp_path)
    proc = setup(copy, "--spack-source", str(tmp_path / "no-such-mirror.git"))
    assert proc.returncode == 2
    assert f"cannot clone {tmp_path / 'no-such-mirror.git'}" in proc.stderr
    assert "Offline? Either point SPACK_ROOT at an existing Spack v1.1.0" in proc.stderr
    assert "--spack-source /path/to/spack.git --packages /path/to/spack-packages" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_spack_root_without_spack_is_refused(tmp_path):
    proc = setup(harness_copy(tmp_path), spack_root=str(tmp_path))
    assert proc.returncode == 2 and f"SPACK_ROOT={tmp_path} has no bin/spack" in proc.stderr


@pytest.mark.spack
def test_another_major_minor_is_refused_unless_forced(tmp_path):
    copy = harness_copy(tmp_path, tag="v0.23.1")
    proc = setup(copy, spack_root=str(find_spack().parents[1]))
    assert proc.returncode == 2
    assert "SPACK_ROOT has Spack 1.1.0, commstack is pinned to 0.23.1 (major.minor differ)" in proc.stderr
    assert not (copy / ".spack" / "repos.yaml").exists()


@pytest.mark.spack
def test_setup_with_a_local_packages_checkout(tmp_path):
    builtin = yaml.safe_load((TOP / ".spack" / "repos.yaml").read_text())["repos"]["builtin"]
    checkout = Path(builtin).parents[2]  # <checkout>/repos/spack_repo/builtin
    copy = harness_copy(tmp_path / "copy")
    user = {"SPACK_USER_CONFIG_PATH": str(tmp_path / "user")}  # Spack's user scope: this test's own
    proc = setup(copy, "--packages", str(checkout), spack_root=str(find_spack().parents[1]), env=user)
    assert proc.returncode == 0, proc.stderr
    assert "setup: using Spack 1.1.0" in proc.stdout
    assert f"; . {find_spack().parents[1]}/share/spack/setup-env.sh\n" in proc.stdout  # how to use it by hand
    for what, tree in (("--packages", checkout), ("SPACK_ROOT", find_spack().parents[1])):
        if (tree / ".git").exists() or (tree / archive.MARKER).is_file():  # a clone, or unpacked by setup: verified
            assert f"setup: {what} {tree}: unverified" not in proc.stdout
        else:  # a copy of unknown origin: setup says it cannot verify the pin
            assert f"setup: {what} {tree}: unverified: not a git checkout (pinned: v" in proc.stdout
    repos = yaml.safe_load((copy / ".spack" / "repos.yaml").read_text())["repos"]
    assert list(repos) == ["commstack", "builtin"] and repos["builtin"] == builtin
    externals = yaml.safe_load((copy / ".spack" / "externals.yaml").read_text())["packages"]
    assert "gcc" in externals and ({"openmpi", "mpich"} & set(externals))
    # issue 36 item 5: the checkout remembers the Spack it was set up with (preflight uses it: tests/spack)
    assert (copy / ".spack" / "spack-root").read_text() == f"{find_spack().parents[1]}\n"
    # item 6: a plain `spack` outside any env reads the pinned builtin, not a clone under ~/.spack/package_repos
    plain = subprocess.run([str(find_spack()), "repo", "list"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300, env={**os.environ, **user, "SPACK_PYTHON": sys.executable})
    assert plain.returncode == 0 and "Warning" not in plain.stderr, plain.stdout + plain.stderr
    assert re.search(rf"builtin +v[\d.]+ +{re.escape(builtin)}$", plain.stdout, re.M), plain.stdout


def test_a_directory_that_is_not_a_mirror_is_refused_first(tmp_path):
    copy = harness_copy(tmp_path / "copy")
    proc = setup(copy, "--mirror", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (f"--mirror {tmp_path}: neither a source mirror (spack-v1.1.0.tar.gz, spack-packages-v2025.11.0.tar.gz) "
            "nor a mirror made by `bin/commstack mirror create` (commstack-mirror.yaml)") in proc.stderr
    assert not (copy / ".spack" / "repos.yaml").exists()


def test_a_mistyped_option_is_an_error(tmp_path):
    proc = setup(harness_copy(tmp_path), "--detetc")
    assert proc.returncode == 2 and "commstack setup: error: unrecognized arguments: --detetc" in proc.stderr


@pytest.mark.spack
def test_a_kept_checkout_at_another_commit_is_refused(tmp_path):
    """setup reuses .spack/spack-packages when present, and verifies its commit all the same."""
    copy = harness_copy(tmp_path)
    kept = copy / ".spack" / "spack-packages"
    (kept / "repos" / "spack_repo" / "builtin").mkdir(parents=True)
    git = ["git", "-C", str(kept), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(kept)], check=True)
    (kept / "README").write_text("not spack-packages v2025.11.0\n")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-qm", "other"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    proc = setup(copy, spack_root=str(find_spack().parents[1]))
    assert proc.returncode == 2
    assert (f"{kept}: HEAD is {head}, toolchain.yaml pins v2025.11.0 = 119680aeee "
            "(a checkout kept from an earlier setup: remove it to clone again)") in proc.stderr
    assert not (copy / ".spack" / "repos.yaml").exists()


@pytest.mark.parametrize("argv", [["lock", "--dry-run"], ["containerize", "--chek"], ["preflight", "gh200-cray", "-x"]])
def test_spack_commands_refuse_unknown_options(argv):
    """Only `test` passes unknown arguments on; `lock --dry-run` used to rewrite the locks."""
    locks = {p: p.read_bytes() for p in (TOP / "envs").glob("*/spack.lock")}
    proc = subprocess.run([sys.executable, "-m", "commstack", *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"commstack {argv[0]}: error: unrecognized arguments: {argv[-1]}\n" in proc.stderr
    assert {p: p.read_bytes() for p in locks} == locks
