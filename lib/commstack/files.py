"""Every file commstack writes goes through here (a temporary file in the same directory, fsync, rename; never
through a symlink; private where it holds state or secrets), every input file it reads (refused, before a byte is
read, when it is not a regular file or over its limit), and every directory it keeps results or state in
(walk_dir): docs/harness.md#untrusted-input."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

from commstack import exits
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

    exit_status = exits.UNWRITTEN

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
    """Write `data` to `path` so that readers see the old file or the new one, never a part. The temporary file
    is created with `mode` (0600 for secrets) before a byte is written; what is at `path` is checked (writable)."""
    path = Path(path)
    writable(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            os.fchmod(fd, mode)
            write_synced(fd, data.encode() if isinstance(data, str) else data)
            os.replace(tmp, path)  # rename(2) replaces a symlink itself, it does not write through it
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)  # the rename on disk too
        finally:
            os.close(dir_fd)
    except OSError as e:
        raise FileWriteError.of(path, e) from e


def writable(path: Path) -> None:
    """A path commstack is to write, checked (also before the work, not only when it is written): something
    there that is not a regular file is refused (UnsafePathError), and so is a path that cannot be reached (a
    file on the way: FileWriteError)."""
    try:
        regular_or_missing(path)
    except OSError as e:
        raise FileWriteError.of(path, e) from e


def write_synced(fd: int, data: bytes) -> None:
    """`data` into the new file open at `fd` (closed after), on disk before the caller makes it seen."""
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


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
    return {stat.S_IFLNK: "a symlink", stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device",
            stat.S_IFBLK: "a block device", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
            stat.S_IFREG: "a regular file"}.get(stat.S_IFMT(mode), "not a regular file")


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
            raise InputFileError(f"{path}: is a symlink; commstack reads this file only as a regular file, never "
                                 "through a link") from None
        raise InputFileError(f"{path}: cannot read: {e.strerror}") from None
    st = os.fstat(fd)  # before fdopen, which refuses a directory with a bare IsADirectoryError
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise InputFileError(f"{path}: is {_kind(st.st_mode)}, not a regular file; commstack reads only regular "
                             "files")
    if st.st_size > limit:
        os.close(fd)
        raise InputFileError(f"{path}: {st.st_size} bytes, more than the {limit} bytes commstack reads from one "
                             "input file")
    return os.fdopen(fd, "rb")


@contextlib.contextmanager
def stdout_written():
    """Standard output written by the block, flushed at its end. A write that fails (a full disk behind `>`,
    /dev/full) is FileWriteError, exit 5, and what is still buffered is dropped (no second error at exit); a
    reader that went away stays BrokenPipeError (cli.main)."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        drop_stdout()
        raise FileWriteError(f"cannot write standard output: {e.strerror or e}", e.errno) from None


def drop_stdout(fd: int | None = None) -> None:
    """Standard output (or `fd`, a copy of it) to /dev/null: what is still buffered goes there, now and at exit,
    not into a traceback."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno() if fd is None else fd)
    os.close(null)


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def private_dir(path: Path) -> None:
    """`path` as a directory only its owner can use: created 0700 if missing; refused when it is a
    symlink, belongs to another user, or is open to group or others. Its parent is one commstack checked
    already (LocalSlurm.check_state, a run's directory)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(_STATE_LINK.format(path))
    _check_private(path, st)


_STATE_LINK = "{} is a symlink; commstack keeps state only in a real directory of its own"


def _check_private(path: Path, st: os.stat_result) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"{path} exists and is not a directory")
    if st.st_uid != os.geteuid():
        raise UnsafePathError(f"{path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}); "
                              "remove it or choose another directory")
    if st.st_mode & 0o077:
        raise UnsafePathError(f"{path} has mode {stat.S_IMODE(st.st_mode):04o}; it must be 0700 "
                              f"(chmod 700 {path}, or remove it)")


def private_path(path: Path) -> Path:
    """`path` as a private directory (private_dir's rules) under parents nobody else can change (walk_dir),
    each missing part made 0700 relative to its checked parent: nothing is made before it is checked."""
    fd, st = walk_dir(path, make=0o700, make_parents=0o700, last_link=_STATE_LINK)
    os.close(fd)
    _check_private(Path(path), st)
    return Path(path)


#: the most symlinks walk_dir follows in one path, as the kernel's own limit (ELOOP)
MAX_LINKS = 40
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def walk_dir(path: Path, make: int | None = None, make_parents: int | None = None,
             last_link: str | None = None) -> tuple[int, os.stat_result]:
    """An open fd of the directory `path` and its fstat, reached from / down one name at a time, each opened
    with O_NOFOLLOW relative to the one before it, so nothing on the way can be swapped between a check and
    its use. Every directory before the last must belong to root or to us and, where others may write it,
    be sticky (as /tmp); the caller checks the last. A symlink on the way is followed only when it belongs
    to root or us (it sits in a directory nobody else may change); the last one is refused with the message
    `last_link` ("{}" stands for the path) when given. A missing part is made with mkdir relative to its checked parent
    (`make_parents` for those before the last, `make` for the last), else FileNotFoundError."""
    path = Path(os.path.abspath(path))
    todo = list(reversed(path.parts[1:]))
    fds, at, links = [os.open("/", DIR_FLAGS)], Path("/"), 0
    try:
        while todo:
            name = todo.pop()
            last = not todo
            if name == "..":
                if len(fds) > 1:
                    os.close(fds.pop())
                at = at.parent
                continue
            try:
                st = os.stat(name, dir_fd=fds[-1], follow_symlinks=False)
            except FileNotFoundError:
                mode = make if last else make_parents
                if mode is None:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, mode, dir_fd=fds[-1])
                st = os.stat(name, dir_fd=fds[-1], follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                if last and last_link:
                    raise UnsafePathError(last_link.replace("{}", str(path)))
                _check_parent(path, at / name, st)
                links += 1
                if links > MAX_LINKS:
                    raise UnsafePathError(f"{path}: more than {MAX_LINKS} symlinks on the way")
                target = Path(os.readlink(name, dir_fd=fds[-1]))
                if target.is_absolute():
                    while len(fds) > 1:
                        os.close(fds.pop())
                    at = Path("/")
                todo.extend(reversed(target.parts[1:] if target.is_absolute() else target.parts))
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise UnsafePathError(f"{at / name} is {_kind(st.st_mode)}, not a directory")
            fds.append(os.open(name, DIR_FLAGS, dir_fd=fds[-1]))
            at, st = at / name, os.fstat(fds[-1])
            if todo:
                _check_parent(path, at, st)
        fd = fds.pop()
        return fd, os.fstat(fd)
    finally:
        for fd in fds:
            os.close(fd)


def _check_parent(path: Path, parent: Path, st: os.stat_result) -> None:
    """Refuse a place whose parent directory (or symlink on the way) someone else could change under us
    (rename our directory away, put a symlink in its place)."""
    if st.st_uid not in (0, os.geteuid()):
        raise UnsafePathError(f"{path}: its parent {parent} belongs to uid {st.st_uid}; keep commstack's state and "
                              "results under directories of your own or root's")
    if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise UnsafePathError(f"{path}: its parent {parent} has mode {stat.S_IMODE(st.st_mode):04o}, writable "
                              "by others without the sticky bit; choose another directory")


def _check_results(path: Path, st: os.stat_result, what: str = "results directory") -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"{what} {path} is {_kind(st.st_mode)}, not a directory")
    if st.st_uid != os.geteuid():
        raise UnsafePathError(f"{what} {path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}); "
                              "another user could put symlinks into it: choose a directory of your own")
    if st.st_mode & 0o022:
        raise UnsafePathError(f"{what} {path} has mode {stat.S_IMODE(st.st_mode):04o}, writable by "
                              f"others; chmod go-w {path}, or choose another directory")


def checked_parent(path: Path) -> None:
    """The directory a file `path` goes into (written by name, as sqlite writes the history and its journal):
    made when missing, each part relative to its checked parent, checked as walk_dir checks the parents, and not
    writable by group or others even when sticky (SQLite rolls back a hot journal another user made first); an
    existing `path` ours and writable by nobody else."""
    fd, st = walk_dir(path.parent, make=0o777, make_parents=0o777)
    os.close(fd)
    _check_parent(path, path.parent, st)
    if st.st_mode & 0o022:
        raise UnsafePathError(f"{path}: its directory {path.parent} has mode {stat.S_IMODE(st.st_mode):04o}, writable "
                              "by group or others, who could make the files written beside it by name first; "
                              "choose a directory of your own")
    with contextlib.suppress(FileNotFoundError):
        if (st := os.lstat(path)).st_uid != os.geteuid() or st.st_mode & 0o022:
            raise UnsafePathError(f"{path} belongs to uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):04o}: it "
                                  f"must be yours (uid {os.geteuid()}) and writable by nobody else")


def results_dir(path: Path) -> int:
    """An open fd of an existing results directory read or rewritten by a command (report, status, compare,
    export, history import): ours and not writable by others, under parents nobody else can change
    (walk_dir; a symlink such as results/latest is followed when it is ours or root's). Nothing in it can
    then be swapped by another user; what is written goes through this fd."""
    try:
        fd, st = walk_dir(path)
    except FileNotFoundError:
        raise UnsafePathError(f"{path}: no such results directory") from None
    try:
        _check_results(Path(path), st)
    except BaseException:
        os.close(fd)
        raise
    return fd


def own_dir(path: Path, private: bool = False, what: str = "results directory") -> Path:
    """A results directory (or another that commstack writes into, `what`) that is ours: created (0750 and the umask)
    when missing, each missing parent made relative to its checked parent (walk_dir), else refused when it is a
    symlink, not a directory, another user's or writable by group or others; and it must take a file (a read-only
    file system: one named error here). `private` (results/ of the checkout): others lose what access they had."""
    path = Path(path)
    try:
        fd, st = walk_dir(path, make=0o750, make_parents=0o777, last_link=f"{what} {{}} is a symlink, not a directory")
    except OSError as e:
        raise FileWriteError.of(path, e) from e
    try:
        _check_results(path, st, what)
        if private and st.st_mode & 0o007:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~0o007)
        probe = f".commstack-{secrets.token_hex(8)}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd))
        os.unlink(probe, dir_fd=fd)
    except OSError as e:
        raise FileWriteError.of(path, e) from e
    finally:
        os.close(fd)
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
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, mode, dir_fd=fd)
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
