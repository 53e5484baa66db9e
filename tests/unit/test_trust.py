"""commstack.spack.trust: who may have changed a file an env runs (issue 48), and the view's binaries, the
no-driver stubs and the facts probe's programs held to it (tests/hostile/test_hostile_envs.py takes the env's
own files through bin/commstack)."""

import os
import pwd
from pathlib import Path

import pytest

from commstack.run.binaries import Binaries
from commstack.spack.trust import MAX_LINKS, UntrustedPathError, check_env, resolve_trusted
from commstack.spack.view import EnvView, Node

NOBODY = pwd.getpwnam("nobody")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def node(name: str, prefix: Path, mpi: bool = False) -> Node:
    return Node(name=name, version="1", hash="abcdefg1234", prefix=str(prefix), installed=True, external=True,
                target="x86_64", family="x86_64", runs_here=True, in_view=None, mpi=mpi, root=True)


def mine(tmp_path: Path) -> Path:
    """tmp_path made writable by nobody else (whatever the umask)."""
    for p in (tmp_path, *tmp_path.rglob("*")):
        if not p.is_symlink():
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return tmp_path


@needs_root
def test_the_no_driver_stubs_of_another_user_never_reach_ld_library_path(tmp_path):
    stubs = tmp_path / "cuda" / "lib64" / "stubs" / "no-driver"
    stubs.mkdir(parents=True)
    (stubs / "libcuda.so.1").write_bytes(b"")
    (stubs / "libnvidia-ml.so.1").write_bytes(b"")
    env = EnvView(path=tmp_path, lock_sha256="0", view=tmp_path / "view", nodes=(node("cuda", tmp_path / "cuda"),))
    mine(tmp_path)
    assert Binaries(env=env).without_driver() == {"LD_LIBRARY_PATH": str(stubs)}
    os.chown(stubs / "libnvidia-ml.so.1", NOBODY.pw_uid, -1)  # any library in it is loadable, not only libcuda
    with pytest.raises(UntrustedPathError, match=f"{stubs / 'libnvidia-ml.so.1'} belongs to another user"):
        Binaries(env=env).without_driver()
    os.chown(stubs / "libnvidia-ml.so.1", 0, -1)
    os.chmod(stubs, 0o777)
    with pytest.raises(UntrustedPathError, match=f"cuda@1/abcdefg's driver stubs: {stubs} is writable by group"):
        Binaries(env=env).without_driver()


@needs_root
def test_a_binary_of_the_view_is_checked_where_it_resolves_to(tmp_path):
    """The view links into the install tree: the file the link leads to is what runs, and what is checked."""
    store, view = tmp_path / "store" / "libfabric", tmp_path / "view"
    (store / "bin").mkdir(parents=True)
    (store / "bin" / "fi_info").write_bytes(b"")
    (view / "bin").mkdir(parents=True)
    (view / "bin" / "fi_info").symlink_to(store / "bin" / "fi_info")
    lf = Node(**{**node("libfabric", store).__dict__, "external": False, "in_view": str(view)})
    env = EnvView(path=tmp_path, lock_sha256="0", view=view, nodes=(lf,))
    mine(tmp_path)
    assert Binaries(env=env).facts_programs() == {"fi_info": str(view / "bin" / "fi_info")}
    os.chown(store / "bin" / "fi_info", NOBODY.pw_uid, -1)
    with pytest.raises(UntrustedPathError, match=f"libfabric@1/abcdefg's bin/fi_info: {store / 'bin' / 'fi_info'} "
                                                 "belongs to another user"):
        Binaries(env=env).facts_programs()
    os.chown(store / "bin" / "fi_info", 0, -1)
    os.chmod(store, 0o775)
    os.chown(store, -1, NOBODY.pw_gid)  # a group with another user in it
    with pytest.raises(UntrustedPathError, match=f"libfabric@1/abcdefg's prefix: {store} is writable by group"):
        env.program("libfabric", "bin/fi_info", "fi_info")


@needs_root
def test_every_library_of_the_view_is_checked_where_it_resolves_to(tmp_path):
    """lib and lib64 of the view's root and of each projection: what its binaries load through their RPATHs."""
    store, view = tmp_path / "store" / "ucx", tmp_path / "view"
    (store / "lib" / "ucx").mkdir(parents=True)
    (store / "lib" / "ucx" / "libuct_ib.so.0").write_bytes(b"")
    (view / "ucx" / "lib" / "ucx").mkdir(parents=True)
    (view / "lib64").mkdir()
    (view / "ucx" / "lib" / "ucx" / "libuct_ib.so.0").symlink_to(store / "lib" / "ucx" / "libuct_ib.so.0")
    ucx = Node(**{**node("ucx", store).__dict__, "external": False, "in_view": str(view / "ucx")})
    env = EnvView(path=tmp_path, lock_sha256="0", view=view, nodes=(ucx,))
    mine(tmp_path)
    env.check_libraries()
    os.chown(store / "lib" / "ucx" / "libuct_ib.so.0", NOBODY.pw_uid, -1)
    with pytest.raises(UntrustedPathError, match=f"its view's lib: {store / 'lib' / 'ucx' / 'libuct_ib.so.0'} "
                                                 "belongs to another user"):
        env.check_libraries()
    os.chown(store / "lib" / "ucx" / "libuct_ib.so.0", 0, -1)
    os.chmod(view / "lib64", 0o757)
    with pytest.raises(UntrustedPathError, match=f"its view's lib64: {view / 'lib64'} is writable by group"):
        env.check_libraries()


@needs_root
def test_a_group_that_holds_nobody_else_may_write(tmp_path):
    """root's group (and a user-private group, umask 002) opens a file to no other user; nogroup does."""
    f = mine(tmp_path) / "f"
    f.write_text("")
    os.chmod(f, 0o664)
    os.chown(f, 0, 0)
    assert resolve_trusted(f, "x") == f
    os.chown(f, 0, NOBODY.pw_gid)
    with pytest.raises(UntrustedPathError, match="is writable by group or others"):
        resolve_trusted(f, "x")


def test_a_sticky_directory_is_trusted_on_the_way_but_not_as_the_env(tmp_path):
    sticky = mine(tmp_path) / "sticky"
    (sticky / "env").mkdir(parents=True)
    os.chmod(sticky / "env", 0o755)
    os.chmod(sticky, 0o1777)
    assert resolve_trusted(sticky / "env", "x") == sticky / "env"
    with pytest.raises(UntrustedPathError, match=f"{sticky} is writable by group or others"):
        resolve_trusted(sticky, "x")


def test_a_loop_of_links_is_a_named_error(tmp_path):
    a, b = mine(tmp_path) / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    with pytest.raises(UntrustedPathError, match=f"more than {MAX_LINKS} symlinks"):
        resolve_trusted(a, "x")


def test_paths_of_the_env_are_read_as_spack_reads_them(tmp_path, monkeypatch):
    """$env, environment variables and a relative path are checked where Spack finds them; a variable commstack
    cannot resolve is refused rather than guessed."""
    env = mine(tmp_path) / "env"
    (env / "repo").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    monkeypatch.setenv("COMMSTACK_TEST_REPO", str(tmp_path / "other"))
    (env / "spack.yaml").write_text("spack:\n  repos: [$env/repo, \"${COMMSTACK_TEST_REPO}\"]\n  view: false\n")
    mine(tmp_path)
    check_env(env)
    os.chmod(tmp_path / "other", 0o777)
    with pytest.raises(UntrustedPathError, match=f"repository {tmp_path / 'other'}: {tmp_path / 'other'} is writable"):
        check_env(env)
    (env / "spack.yaml").write_text("spack:\n  repos: [$tempdir/repo]\n")
    with pytest.raises(UntrustedPathError, match=r"repository \$tempdir/repo: commstack cannot tell which path"):
        check_env(env)
