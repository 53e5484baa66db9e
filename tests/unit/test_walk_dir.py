"""files.walk_dir and what is built on it (issue 32 item 4): a directory reached from / down one name at a
time, symlinks of our own or root's followed (results/latest), nothing made before its parent passed."""

import os
import stat

import pytest

from commstack.files import UnsafePathError, own_dir, private_path, results_dir, walk_dir


def same_dir(fd: int, path) -> bool:
    st, want = os.fstat(fd), os.stat(path)
    return (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino)


def test_our_symlinks_are_followed_relative_absolute_and_through_dotdot(tmp_path):
    run = tmp_path / "results" / "run1"
    run.mkdir(parents=True, mode=0o750)
    run.chmod(0o750)
    (tmp_path / "results" / "latest").symlink_to("run1")  # as results/latest
    (tmp_path / "up").symlink_to("results/run1/../run1")
    (tmp_path / "abs").symlink_to(tmp_path / "results" / "latest")
    for given in ("results/latest", "up", "abs"):
        fd = results_dir(tmp_path / given)
        try:
            assert same_dir(fd, run), given
        finally:
            os.close(fd)


def test_a_symlink_loop_and_a_file_on_the_way_are_named(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(UnsafePathError, match="more than 40 symlinks on the way"):
        walk_dir(tmp_path / "a" / "x")
    (tmp_path / "file").write_text("")
    with pytest.raises(UnsafePathError, match=f"{tmp_path / 'file'} is a regular file, not a directory"):
        walk_dir(tmp_path / "file" / "x", make=0o700, make_parents=0o700)
    with pytest.raises(UnsafePathError, match="no such results directory"):
        results_dir(tmp_path / "missing")


def test_missing_parts_are_made_with_their_modes(tmp_path):
    umask = os.umask(0o022)
    try:
        assert own_dir(tmp_path / "x" / "y" / "run") == tmp_path / "x" / "y" / "run"
        assert private_path(tmp_path / "s" / "t") == tmp_path / "s" / "t"
    finally:
        os.umask(umask)
    assert stat.S_IMODE(os.stat(tmp_path / "x" / "y").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(tmp_path / "x" / "y" / "run").st_mode) == 0o750
    assert {stat.S_IMODE(os.stat(p).st_mode) for p in (tmp_path / "s", tmp_path / "s" / "t")} == {0o700}


def test_a_directory_writable_by_others_on_the_way_is_refused_before_anything_is_made(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UnsafePathError, match=f"its parent {shared} has mode 0777, writable by others"):
        own_dir(shared / "a" / "run")
    assert os.listdir(shared) == []
    (tmp_path / "state").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePathError, match="state is a symlink; commstack keeps state only in a real directory"):
        private_path(tmp_path / "state")
    assert not (tmp_path / "elsewhere").exists()
