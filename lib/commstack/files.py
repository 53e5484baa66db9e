"""Every file commstack writes goes through here: atomically (a temporary file in the same
directory, fsync, rename), never through a symlink, and private where it holds state or secrets."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from commstack.errors import CommstackError


class UnsafePathError(CommstackError):
    """A path commstack would write or keep state in is a symlink, or belongs to someone else."""


class FileWriteError(CommstackError):
    """A file could not be written (full file system, no permission, ...); the old one is intact.
    The commands exit with `exit_status`: not bad input, and not a verdict of the steps."""

    exit_status = 5

    def __init__(self, message: str, errno_: int | None = None):
        self.errno = errno_
        super().__init__(message)

    @classmethod
    def of(cls, path: Path, e: OSError) -> "FileWriteError":
        return cls(f"cannot write {path}: {e.strerror or e}", e.errno)

    @property
    def full(self) -> bool:
        """The file system (or the user's quota) is full."""
        return self.errno in (errno.ENOSPC, errno.EDQUOT)


def write_atomic(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a part.
    The temporary file is created with `mode` (0600 for secrets) before a byte is written;
    a symlink at `path` is replaced, not followed."""
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    try:
        _write_atomic(path, raw, mode)
    except OSError as e:
        raise FileWriteError.of(path, e) from e


def _write_atomic(path: Path, raw: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # rename(2) replaces a symlink itself, it does not write through it
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def private_dir(path: Path) -> Path:
    """`path` as a directory only its owner can use: created 0700 if missing; refused when it is a
    symlink, belongs to another user, or is open to group or others."""
    path = Path(path)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(f"{path} is a symlink; commstack keeps state only in a real directory of its own")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"{path} exists and is not a directory")
    if st.st_uid != os.geteuid():
        raise UnsafePathError(f"{path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}); "
                              "remove it or choose another directory")
    if st.st_mode & 0o077:
        raise UnsafePathError(f"{path} has mode {stat.S_IMODE(st.st_mode):04o}; it must be 0700 "
                              f"(chmod 700 {path}, or remove it)")
    return path


def safe_parents(path: Path) -> None:
    """Refuse a place whose parent directories someone else could change under us (rename our directory
    away, put a symlink in its place): each one, and each symlink on the way, must belong to root or to
    us, and a directory others may write must be sticky, as /tmp is."""
    path = Path(os.path.abspath(path))
    for parent in [*path.parents, *Path(os.path.realpath(path)).parents]:
        st = os.lstat(parent)
        if st.st_uid not in (0, os.geteuid()):
            raise UnsafePathError(f"{path}: its parent {parent} belongs to uid {st.st_uid}; keep commstack's state "
                                  "under directories of your own or root's")
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise UnsafePathError(f"{path}: its parent {parent} has mode {stat.S_IMODE(st.st_mode):04o}, writable "
                                  "by others without the sticky bit; choose another directory")


def sync_tree(directory: Path) -> None:
    """fsync every file under `directory` and the directories themselves, before it is swapped in."""
    for root, _, names in os.walk(directory):
        for name in names:
            fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NOFOLLOW)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(root))
