"""Issue 48 with a real Spack: an env whose repository's package.py writes a marker file when imported,
concretized here (the concretization imports it: the marker appears, so the premise holds). Trusted (root's,
writable by nobody else), `run --env --dry-run` reads it through Spack and imports no package code (the lock's
edges say which node is the MPI). Each part of the env another user owns is refused by name before Spack reads
anything, the marker never written (tests/hostile/test_hostile_envs.py takes every part and every way an env is
given, without Spack)."""

import os
import pwd
import subprocess
from pathlib import Path

import pytest

from commstack.paths import TOP
from commstack import exits

pytestmark = pytest.mark.spack
NOBODY = pwd.getpwnam("nobody")
PACKAGE = """from spack_repo.builtin.build_systems.bundle import BundlePackage

from spack.package import *

open({marker!r}, "w").close()


class Planted(BundlePackage):
    version("1.0")
"""


def commstack(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TOP / "bin" / "commstack"), *args], capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def planted(spack, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("planted")
    repo, env, marker = root / "spack_repo" / "planted", root / "env", root / "PWNED-at-import"
    (repo / "packages" / "planted").mkdir(parents=True)
    (repo / "repo.yaml").write_text("repo:\n  namespace: planted\n  api: v2.0\n")
    (repo / "packages" / "planted" / "package.py").write_text(PACKAGE.format(marker=str(marker)))
    env.mkdir()
    includes = ", ".join(str(TOP / ".spack" / f) for f in ("repos.yaml", "externals.yaml"))
    (env / "spack.yaml").write_text(f"spack:\n  include: [{includes}]\n  repos: [{repo}]\n  specs: [planted]\n"
                                    "  view: false\n")
    for p in (root, *root.rglob("*")):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    spack("concretize", env_dir=env, timeout=1800)
    marker.unlink()  # the concretization imported it (missing: the marker proves nothing), as it would for its owner
    return {"env dir": env, "named repo": repo, "package.py": repo / "packages" / "planted" / "package.py",
            "marker": marker}


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
@pytest.mark.parametrize("part", ["env dir", "named repo", "package.py"])
def test_an_env_is_read_without_its_package_code_and_refused_where_another_user_owns_a_part(planted, part):
    """The control first (read through Spack, no package.py imported), then the part owned by nobody."""
    proc = commstack("run", "--env", str(planted["env dir"]), "--dry-run")
    assert f"env {planted['env dir']} is not installed" in proc.stderr, proc.stderr  # read through Spack
    assert not planted["marker"].exists(), "reading a trusted env imported its package code"
    os.chown(planted[part], NOBODY.pw_uid, -1)
    try:
        proc = commstack("run", "--env", str(planted["env dir"]), "--dry-run")
    finally:
        os.chown(planted[part], 0, -1)
    assert proc.returncode == exits.USAGE
    assert f"{planted[part]} belongs to another user (owner nobody" in proc.stderr, proc.stderr
    assert not planted["marker"].exists(), "root imported another user's package.py"
