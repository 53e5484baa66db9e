"""Issue 48 with a real Spack: an env whose repository's package.py writes a marker file when imported,
concretized here (the concretization imports it: the marker appears, so the premise holds). Trusted (root's,
writable by nobody else), `run --env --dry-run` reads it through Spack and imports no package code (the lock's
edges say which node is the MPI). Each part of the env another user owns is refused by name before Spack reads
anything, the marker never written (tests/hostile/test_hostile_envs.py takes every part and every way an env is
given, without Spack). Then an installed env (a package of that repository built here, a CUDA external with the
no-driver stubs): what a run loads from it (its view, a library and a binary of the view, the stubs directory and a
file in it) refused by name every way an env is given, and a trusted one read without importing package code."""

import contextlib
import os
import pwd
import stat
import subprocess
from pathlib import Path

import pytest

from commstack import exits
from commstack.paths import TOP
from commstack.results.records import read_run

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


# ------------------------------------------------------------------------------- an installed env: what a run loads

#: an mpi-pingpong of the planted repository, built here: its binary (a script) and a library, in the view
PINGPONG = """from spack_repo.builtin.build_systems.generic import Package

from spack.package import *

open({marker!r}, "w").close()


class MpiPingpong(Package):
    has_code = False
    version("1.0")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        mkdirp(prefix.lib)
        with open(join_path(prefix.bin, "mpi-pingpong"), "w") as f:
            f.write("#!/bin/sh\\nexit 0\\n")
        set_executable(join_path(prefix.bin, "mpi-pingpong"))
        open(join_path(prefix.lib, "libpingpong.so.1"), "w").close()
"""


@pytest.fixture(scope="module")
def installed(spack, tmp_path_factory) -> dict[str, Path]:
    """An installed env of the planted repository (its mpi-pingpong, whose package.py writes the marker when
    imported) and a CUDA external whose prefix holds the no-driver stubs (lib64/stubs/no-driver, as
    ci/cuda-wheels.py makes it); a system file whose `install: {env:}` names it. Root's, writable by nobody else."""
    root = tmp_path_factory.mktemp("installed")
    repo, env, cuda, marker = root / "spack_repo" / "planted", root / "env", root / "cuda", root / "PWNED-at-import"
    (repo / "packages" / "mpi_pingpong").mkdir(parents=True)
    (repo / "repo.yaml").write_text("repo:\n  namespace: planted\n  api: v2.0\n")
    (repo / "packages" / "mpi_pingpong" / "package.py").write_text(PINGPONG.format(marker=str(marker)))
    stubs = cuda / "lib64" / "stubs" / "no-driver"
    stubs.mkdir(parents=True)
    (stubs / "libcuda.so.1").write_bytes(b"")
    env.mkdir()
    (env / "spack.yaml").write_text(
        f"spack:\n  include: [{TOP / '.spack' / 'repos.yaml'}]\n  repos: [{repo}]\n"
        "  specs: [planted.mpi-pingpong@1.0, cuda@12.8.1]\n"
        f"  packages:\n    cuda:\n      buildable: false\n      externals:\n"
        f"      - {{spec: cuda@12.8.1, prefix: {cuda}}}\n")
    system = root / "system.yaml"
    system.write_text((TOP / "systems" / "local.yaml").read_text() + f"install:\n  env: {env}\n")
    spack("concretize", env_dir=env, timeout=1800)
    spack("install", "--fail-fast", env_dir=env, timeout=1800)
    for p in (root, *root.rglob("*")):
        if not p.is_symlink():
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
    marker.unlink()  # the concretization imported it, as it would for its owner
    view = env / ".spack-env" / "view"
    return {"env dir": env, "view": view, "binary of the view": view / "bin" / "mpi-pingpong",
            "library of the view": view / "lib" / "libpingpong.so.1", "stubs dir": stubs,
            "file in the stubs dir": stubs / "libcuda.so.1", "marker": marker, "system": system}


#: how a user gives the env (ENV, SYS, RESULTS filled in): no Slurm (`--slurm off`), nothing launched
GIVEN = {"run --env": ["run", "--slurm", "off", "--env", "ENV", "--results", "RESULTS"],
         "suite --env": ["suite", "smoke", "--slurm", "off", "--env", "ENV", "--results", "RESULTS"],
         "install: {env:}": ["suite", "smoke", "--slurm", "off", "--system", "SYS", "--results", "RESULTS"],
         "--dry-run": ["run", "--dry-run", "--env", "ENV"]}
#: parts refused when the env is loaded (exit 2); the others make the steps that load them not-run (a dry run
#: prints why, exit 0)
AT_LOAD = ("view", "library of the view")
HOWS = ("owned by nobody", "group-writable", "writable by others")


def given(way: str, installed: dict[str, Path], results: Path) -> list[str]:
    values = {"ENV": str(installed["env dir"]), "SYS": str(installed["system"]), "RESULTS": str(results)}
    return [values.get(a, a) for a in GIVEN[way]]


@contextlib.contextmanager
def damaged(path: Path, how: str):
    """`path` owned by nobody (a symlink itself), or writable by group or others (a symlink: the file it leads
    to, as that is what is checked); yields the path the refusal names (the symlinks above it followed, as the
    check walks them: the view's link to its ._view/<hash>); put back as it was afterwards."""
    named = path.resolve() if how != "owned by nobody" and path.is_symlink() else path.parent.resolve() / path.name
    st = os.lstat(named)
    try:
        if how == "owned by nobody":
            os.lchown(named, NOBODY.pw_uid, -1)
        else:
            os.lchown(named, -1, NOBODY.pw_gid if how == "group-writable" else -1)
            os.chmod(named, st.st_mode | (0o020 if how == "group-writable" else 0o002))
        yield named
    finally:
        os.lchown(named, st.st_uid, st.st_gid)
        if not stat.S_ISLNK(st.st_mode):
            os.chmod(named, stat.S_IMODE(st.st_mode))


def test_an_installed_env_of_root_runs_its_view_and_the_stubs_and_imports_no_package_code(installed, tmp_path):
    """The control: every way, the env is read (no package.py imported), mpi-pingpong comes from its view and the
    stubs go on LD_LIBRARY_PATH; `--slurm off` leaves each step not-run for want of Slurm, nothing refused."""
    for way in GIVEN:
        proc = commstack(*given(way, installed, tmp_path / way.replace(" ", "_")))
        said = proc.stdout + proc.stderr
        assert "belongs to another user" not in said and "writable by group" not in said, said
        assert not installed["marker"].exists(), f"{way}: reading a trusted env imported its package code"
        if way == "--dry-run":
            assert proc.returncode == 0, said
            assert f"# mpi-pingpong: {installed['binary of the view']}, from mpi-pingpong@1.0/" in said, said
            assert f"# no GPU on these nodes: LD_LIBRARY_PATH={installed['stubs dir']}" in said, said
        else:
            assert proc.returncode == exits.NOT_RUN, said
            pp = next(r for r in read_run(tmp_path / way.replace(" ", "_")) if r.benchmark == "mpi-pingpong")
            assert pp.binary["path"] == str(installed["binary of the view"]), pp.binary
            assert f"LD_LIBRARY_PATH={installed['stubs dir']}" in pp.binary["cuda_driver"], pp.binary


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
@pytest.mark.parametrize("way", list(GIVEN))
@pytest.mark.parametrize("part", ["view", "library of the view", "binary of the view", "stubs dir",
                                  "file in the stubs dir"])
def test_what_a_run_loads_from_an_env_is_refused_by_name_where_another_user_could_change_it(
        installed, tmp_path, part, way):
    """Each part, each way the env is given; the damage taken in turn (all three by a dry run)."""
    hows = HOWS if way == "--dry-run" else [HOWS[(list(GIVEN).index(way) + len(part)) % len(HOWS)]]
    for how in hows:
        results = tmp_path / how.replace(" ", "_")
        with damaged(installed[part], how) as named:
            proc = commstack(*given(way, installed, results))
        said = proc.stdout + proc.stderr
        assert (f"{named} belongs to another user (owner nobody" if how == "owned by nobody" else
                f"{named} is writable by group or others") in said, f"{part}, {how}, {way}: {said}"
        assert f"env {installed['env dir']}" in said
        assert not installed["marker"].exists(), "root imported another user's package.py"
        if part in AT_LOAD:
            assert proc.returncode == exits.USAGE, said
            assert not results.exists()
        elif way == "--dry-run":
            assert proc.returncode == 0, said  # the line of what it refuses, as for any binary it cannot use
        else:
            assert proc.returncode == exits.NOT_RUN, said
            refused = [r for r in read_run(results) if r.error_kind == "untrusted-path"]
            assert refused and all(str(named) in r.reason for r in refused), said
            assert not [r for r in read_run(results) if r.verdict not in ("not-run",)]
