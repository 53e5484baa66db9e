"""`bin/commstack setup` from `git archive` tarballs (--spack-source, --packages, --mirror DIR), given tarballs that
are not what toolchain.yaml pins: each is refused by name, naming the tarball's commit and the pinned one, before
anything is written; and a tarball that claims the pinned commit but would write outside its folder is refused
while unpacking, leaving nothing behind. Each runs on a copy of this checkout without a set-up
(checkouts.without_osu), so no earlier set-up's tree is reused instead."""

import io
import os
import pwd
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml
from checkouts import without_osu

from commstack.paths import TOP

pytestmark = pytest.mark.hostile

PINS = yaml.safe_load((TOP / "toolchain.yaml").read_text())
SPACK, PACKAGES = PINS["spack"], PINS["spack_packages"]
NOBODY_UID = pwd.getpwnam("nobody").pw_uid


def setup(copy: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TOP / "bin" / "commstack"), "setup", *args], capture_output=True, text=True,
                          timeout=300, env=copy, stdin=subprocess.DEVNULL)


def git_archive(tmp_path: Path, name: str, what: str = "HEAD") -> tuple[Path, str]:
    """A `git archive` tarball of a one-commit repository of our own (what: HEAD, or HEAD^{tree}: no commit)."""
    repo = tmp_path / f"{name}-repo"
    (repo / "bin").mkdir(parents=True)
    (repo / "bin" / "spack").write_text("#!/bin/sh\necho 1.1.0\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "not the pinned commit"]):
        subprocess.run(git + argv, check=True, capture_output=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    out = tmp_path / f"{name}.tar.gz"
    subprocess.run(git + ["archive", "--format=tar.gz", f"--prefix={name}/", "-o", str(out), what], check=True)
    return out, commit


@pytest.fixture
def copy(tmp_path) -> dict:
    return without_osu(tmp_path, dict(os.environ))


def refused(copy: dict, *args: str) -> str:
    """set-up's stderr, once it has exited 2 having written nothing (no .spack/ in the copy)."""
    proc = setup(copy, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert not (Path(copy["COMMSTACK_HOME"]) / ".spack").exists()
    return proc.stderr


def mirror_of(tmp_path: Path, spack: Path, packages: Path) -> tuple[Path, Path]:
    """A mirror directory laid out as docs/ci.md says (its tarballs named by the pinned tags), and its Spack's."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    spack = spack.rename(mirror / f"spack-{SPACK['tag']}.tar.gz")
    packages.rename(mirror / f"spack-packages-{PACKAGES['tag']}.tar.gz")
    return mirror, spack


def test_a_spack_tarball_of_another_commit_is_refused_naming_both(tmp_path, copy):
    tarball, commit = git_archive(tmp_path, "spack")
    assert (f"commstack setup: error: --spack-source {tarball} is commit {commit}; toolchain.yaml pins "
            f"{SPACK['tag']} = {SPACK['commit']}") in refused(copy, "--spack-source", str(tarball))


def test_a_packages_tarball_of_no_commit_is_refused_naming_the_pin(tmp_path, copy):
    """`git archive` of a tree (not a commit) has no commit in its header."""
    tarball, _ = git_archive(tmp_path, "spack-packages", "HEAD^{tree}")
    assert (f"commstack setup: error: --packages {tarball} has no commit in its header (not `git archive` of a "
            f"commit); toolchain.yaml pins {PACKAGES['tag']} = {PACKAGES['commit']}") in refused(
        copy, "--packages", str(tarball))


def test_a_mirror_whose_spack_tarball_is_another_commit_is_refused(tmp_path, copy):
    """Named by the pinned tags, but made elsewhere."""
    spack, commit = git_archive(tmp_path, "spack")
    mirror, spack = mirror_of(tmp_path, spack, git_archive(tmp_path, "spack-packages")[0])
    assert (f"commstack setup: error: --mirror {spack} is commit {commit}; toolchain.yaml pins "
            f"{SPACK['tag']} = {SPACK['commit']}") in refused(copy, "--mirror", str(mirror))


def test_a_mirror_with_a_wrong_checksum_is_refused(tmp_path, copy):
    for name in ("spack", "packages"):
        (tmp_path / name).write_bytes(b"not what SHA256SUMS says")
    mirror, spack = mirror_of(tmp_path, tmp_path / "spack", tmp_path / "packages")
    (mirror / "SHA256SUMS").write_text(f"{'0' * 64}  {spack.name}\n")
    stderr = refused(copy, "--mirror", str(mirror))
    assert f"{spack}: sha256 " in stderr and f", {mirror / 'SHA256SUMS'} says {'0' * 64}" in stderr


def test_a_tarball_with_the_pinned_commit_that_writes_outside_its_folder_is_refused(tmp_path, copy):
    """The commit header is easy to forge: the pinned commit, then a member `../escape`. Unpacked in a scratch
    directory of .spack/ with tarfile's data filter: refused, and neither the member nor the scratch is left."""
    forged = tmp_path / "spack.tar.gz"
    with tarfile.open(forged, "w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": SPACK["commit"]}) as tar:
        for name in ("spack/bin/spack", "spack/../../escape"):
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"hi\n"))
    header = subprocess.run(f"gzip -dc {forged} | git get-tar-commit-id", shell=True, capture_output=True, text=True)
    assert header.stdout.strip() == SPACK["commit"]  # the forgery passes the commit check
    proc = setup(copy, "--spack-source", str(forged))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"commstack setup: error: {forged}: cannot unpack it: " in proc.stderr
    state = Path(copy["COMMSTACK_HOME"]) / ".spack"
    assert sorted(p.name for p in state.iterdir()) == []  # no spack/, no scratch directory
    assert not (state.parent / "escape").exists() and not (state / "escape").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
@pytest.mark.parametrize("option", ["--spack-source", "--packages"])
@pytest.mark.parametrize("how", ["owned by nobody", "in a directory others may write"])
def test_a_tarball_another_user_could_have_made_is_refused_before_it_is_unpacked(tmp_path, copy, option, how):
    """Its commit header forged to the pinned commit, its bin/spack a script that writes a marker: set-up unpacked
    another user's tarball and ran its `spack --version` as root. Refused by name; nothing written, nothing run."""
    marker = tmp_path / "PWNED-by-setup"
    shared = tmp_path / "shared"
    shared.mkdir()
    pin = SPACK if option == "--spack-source" else PACKAGES
    forged = shared / "forged.tar.gz"
    with tarfile.open(forged, "w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": pin["commit"]}) as tar:
        script = f"#!/bin/sh\ntouch {marker}\necho 1.1.0\n".encode()
        info = tarfile.TarInfo("spack/bin/spack")
        info.size, info.mode = len(script), 0o755
        tar.addfile(info, io.BytesIO(script))
    if how == "owned by nobody":
        os.chown(forged, NOBODY_UID, -1)
        said = f"{option}: {forged} belongs to another user (owner nobody"
    else:
        os.chmod(shared, 0o777)
        said = f"{option}: {shared} is writable by group or others (owner root, uid 0, mode 0777)"
    stderr = refused(copy, option, str(forged))
    assert said in stderr, stderr
    assert not marker.exists()
