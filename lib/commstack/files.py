"""Every file commstack writes goes through here: atomically (a temporary file in the same
directory, fsync, rename), never through a symlink nor over something that is not a regular file, and
private where it holds state or secrets. Every input file is read through here too: refused, before a
byte is read, when it is not a regular file or is larger than its limit (a FIFO, /dev/zero)."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

from commstack.errors import CommstackError, InputFileError

#: the largest input file read whole: suites, systems, references, records, plans
MAX_INPUT = 16 * 2 ** 20
#: the largest benchmark output `commstack parse` or a reference's recorded output reads
MAX_OUTPUT = 64 * 2 ** 20


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
    The temporary file is created with `mode` (0600 for secrets) before a byte is written.
    Something at `path` that is not a regular file (a symlink, a device such as /dev/null, a FIFO, a
    directory) is refused, never replaced nor written through."""
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    try:
        regular_or_missing(path)
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


def regular_or_missing(path: Path) -> None:
    """UnsafePathError when `path` exists and is not a regular file (symlinks not followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(f"{path} exists and is {_kind(st.st_mode)}, not a regular file; commstack replaces "
                              "only regular files: remove it or choose another path")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_bounded(path: Path, limit: int = MAX_INPUT, follow_symlinks: bool = True) -> bytes:
    """The bytes of the input file `path`; InputFileError when it is not a regular file (checked on the
    open file: a FIFO is opened without waiting for a writer), is a symlink and `follow_symlinks` is
    false (files commstack wrote itself), or holds more than `limit` bytes."""
    with open_bounded(path, limit, follow_symlinks) as f:
        try:
            data = f.read(limit + 1)  # a file that grows while it is read is cut at the limit, and refused
        except OSError as e:
            raise InputFileError(f"{path}: cannot read: {e.strerror}") from None
    if len(data) > limit:
        raise InputFileError(f"{path}: more than the {limit} bytes commstack reads from one input file")
    return data


def open_bounded(path: Path, limit: int = MAX_INPUT, follow_symlinks: bool = True) -> BinaryIO:
    """The input file `path` open for reading, checked as read_bounded checks it (its size when opened;
    a reader of its lines counts them against `limit` itself)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow_symlinks:
            raise InputFileError(f"{path}: is a symlink; commstack reads the files it wrote only as regular files") \
                from None
        raise InputFileError(f"{path}: cannot read: {e.strerror}") from None
    f = os.fdopen(fd, "rb")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        f.close()
        raise InputFileError(f"{path}: is {_kind(st.st_mode)}, not a regular file; commstack reads only regular "
                             "files")
    if st.st_size > limit:
        f.close()
        raise InputFileError(f"{path}: {st.st_size} bytes, more than the {limit} bytes commstack reads from one "
                             "input file")
    return f


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
            raise UnsafePathError(f"{path}: its parent {parent} belongs to uid {st.st_uid}; keep commstack's state and "
                                  "results under directories of your own or root's")
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise UnsafePathError(f"{path}: its parent {parent} has mode {stat.S_IMODE(st.st_mode):04o}, writable "
                                  "by others without the sticky bit; choose another directory")


def own_dir(path: Path, private: bool = False) -> Path:
    """A results directory that is ours: created (0750 and the umask) when missing, else refused when it is a
    symlink, not a directory, belongs to another user or is writable by group or others; its parents must
    be safe (safe_parents), and it must take a file (a read-only file system is one named error here,
    not one per step). `private` (results/ of the checkout): others lose what access they had."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        safe_parents(path)
        os.mkdir(path, 0o750)
    except FileExistsError:
        pass
    except OSError as e:
        raise FileWriteError.of(path, e) from e
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"results directory {path} is {_kind(st.st_mode)}, not a directory")
    if st.st_uid != os.geteuid():
        raise UnsafePathError(f"results directory {path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}); "
                              "another user could put symlinks into it: choose a directory of your own")
    if st.st_mode & 0o022:
        raise UnsafePathError(f"results directory {path} has mode {stat.S_IMODE(st.st_mode):04o}, writable by "
                              f"others; chmod go-w {path}, or choose another directory")
    try:
        if private and st.st_mode & 0o007:
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o007)
        os.close(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW))
        fd, probe = tempfile.mkstemp(prefix=".commstack-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise FileWriteError.of(path, e) from e
    return path


def make_dirs(root: Path, *names: str, mode: int = 0o750) -> Path:
    """root/names[0]/names[1]/..., each made when missing and opened with O_NOFOLLOW relative to the one
    before it (os.open with dir_fd): a symlink planted on the way is refused, never followed. Each name
    must be a plain file name (inside_name): nothing built from input leaves `root`, made when missing."""
    Path(root).mkdir(mode=mode, parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in names:
            inside_name(name)
            try:
                os.mkdir(name, mode, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePathError(f"{Path(root, *names[:names.index(name) + 1])} is a symlink or not a "
                                          "directory; commstack writes results only into directories it made") from None
                raise
            os.close(fd)
            fd = sub
    finally:
        os.close(fd)
    return Path(root, *names)


def inside_name(name: str) -> str:
    """`name` when it is one plain file name (no '/', not '', '.' or '..', no NUL): a path built from it
    stays in its directory."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise UnsafePathError(f"{name!r} is not a plain file name; a path built from it would leave its directory")
    return name


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
