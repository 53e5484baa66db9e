"""Writing, swapping and removing inside a directory through its open fd (files.results_dir gives one):
every name is looked up relative to that fd with O_NOFOLLOW, so a directory renamed away and a symlink put
in its place while commstack works is never written through, and a removal never follows a symlink.
The report is written this way: rendered into a new directory, then `report` swapped onto it."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from pathlib import Path

from commstack.files import DIR_FLAGS, FileWriteError, UnsafePathError, inside_name, write_synced


def make_dir(dir_fd: int, name: str, shown: Path, mode: int = 0o750) -> int:
    """A new directory `name` (a plain name) in `dir_fd`, opened; FileWriteError naming `shown` when it cannot be
    made (a full file system)."""
    inside_name(name)
    try:
        os.mkdir(name, mode, dir_fd=dir_fd)
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        raise FileWriteError.of(shown, e) from e


def write_in(dir_fd: int, name: str, data: bytes, shown: Path) -> None:
    """A new regular file `name` in `dir_fd` holding `data`, fsynced: created exclusively, never through a
    symlink; FileWriteError naming `shown` (ENOSPC: the file system is full)."""
    inside_name(name)
    try:
        write_synced(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                             dir_fd=dir_fd), data)
    except OSError as e:
        raise FileWriteError.of(shown, e) from e


def swap_link(dir_fd: int, link: str, target: str, shown: Path) -> str | None:
    """`link` in `dir_fd` made a symlink to the plain name `target` in one rename, replacing a symlink itself
    (never what it points to). Returns what the old `link` named when that may be removed now: the plain name
    its symlink pointed to, or the real directory (an older commstack's) set aside under a new name; None when
    there was none or it pointed elsewhere (a planted `report -> /some/dir` is replaced, its target untouched)."""
    inside_name(target)
    tmp = f".{link}-link-{secrets.token_hex(4)}"
    try:
        os.symlink(target, tmp, dir_fd=dir_fd)
        st, old = None, None
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(link, dir_fd=dir_fd, follow_symlinks=False)
        if st and stat.S_ISLNK(st.st_mode):
            named = os.readlink(link, dir_fd=dir_fd)
            old = named if "/" not in named and named not in ("", ".", "..", target) else None
        elif st and stat.S_ISDIR(st.st_mode):
            old = f".{link}-old-{secrets.token_hex(4)}"
            os.rename(link, old, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.rename(tmp, link, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as e:
        raise FileWriteError.of(shown, e) from e
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
    os.fsync(dir_fd)
    return old


def remove_tree(dir_fd: int, name: str) -> None:
    """`name` in `dir_fd` and everything below it, through directory fds: a symlink at `name` is refused
    (UnsafePathError), one inside is removed itself, never followed (shutil.rmtree's fd-based walk)."""
    st = os.stat(inside_name(name), dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(f"{name} is a symlink; commstack removes only directories it made, never through a "
                              "symlink")
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    shutil.rmtree(name, dir_fd=dir_fd)
