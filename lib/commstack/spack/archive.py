"""`git archive` tarballs for `bin/commstack setup`: Spack and spack-packages at the pinned commit (its header's),
each unpacked once into .spack/ keeping the commit it came from, and the source trees the local env builds as
`spack develop` trees (docs/getting-spack.md, "Offline")."""

from __future__ import annotations

import gzip
import hashlib
import re
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from commstack.errors import CommstackError, ConfigError
from commstack.files import write_atomic

#: in a tree unpacked from a tarball: the commit the tarball was made from (git's HEAD, for a clone)
MARKER = ".commstack-archive-commit"
#: a mirror directory's package source trees: NAME-VERSION-src.tar.gz (osu-micro-benchmarks-7.5.1-src.tar.gz)
SOURCE_TREE = re.compile(r"(?P<name>[a-z0-9][a-z0-9-]*)-(?P<version>[0-9][0-9A-Za-z.]*)-src\.tar\.gz")
SUMS = "SHA256SUMS"
SUM_LINE = re.compile(r"(?P<sha>[0-9a-f]{64}) [ *](?P<name>[^/]+)")


class ArchiveError(CommstackError):
    """A tarball that cannot be used: not a gzip'ed tar, not one top folder, an unsafe member, a bad checksum."""


class ArchiveCommitError(ArchiveError):
    """A tarball's embedded commit is not the one toolchain.yaml pins, or it has none."""


def commit_of(tarball: Path) -> str | None:
    """The commit a `git archive` tarball was made from (None: a tarball of a tree, or not of git at all)."""
    try:
        with gzip.open(tarball) as f:
            head = f.read(1024)  # the pax global header that git archive writes first
    except (OSError, EOFError) as e:
        raise ArchiveError(f"{tarball}: not a gzip'ed tar ({e})") from None
    proc = subprocess.run(["git", "get-tar-commit-id"], input=head, capture_output=True, timeout=60)
    commit = proc.stdout.decode().strip()
    return commit if proc.returncode == 0 and commit else None


def check_commit(tarball: Path, pin: dict, what: str) -> str:
    """The tarball's commit, which must be the pinned one."""
    commit = commit_of(tarball)
    if commit is None:
        raise ArchiveCommitError(f"{what} {tarball} has no commit in its header (not `git archive` of a commit); "
                                 f"toolchain.yaml pins {pin['tag']} = {pin['commit']}")
    if not commit.startswith(pin["commit"]):
        raise ArchiveCommitError(f"{what} {tarball} is commit {commit}; toolchain.yaml pins "
                                 f"{pin['tag']} = {pin['commit']}")
    return commit


def kept_commit(tree: Path) -> str | None:
    """The commit of the tarball an earlier set-up unpacked into `tree` (None: not unpacked from one)."""
    marker = tree / MARKER
    return marker.read_text().strip() if marker.is_file() and not marker.is_symlink() else None


def unpack(tarball: Path, dest: Path, commit: str | None) -> None:
    """The tarball's one top folder as `dest` (which must not exist), the commit kept in it."""
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".unpack-") as scratch:  # 0700, same file system
        try:
            with tarfile.open(tarball, "r:gz") as tar:
                tar.extractall(scratch, filter="data")  # no absolute paths, no ../, no links out of it
        except (tarfile.TarError, OSError, EOFError) as e:
            raise ArchiveError(f"{tarball}: cannot unpack it: {e}") from None
        tops = list(Path(scratch).iterdir())
        if len(tops) != 1 or not tops[0].is_dir() or tops[0].is_symlink():
            raise ArchiveError(f"{tarball}: holds {', '.join(sorted(t.name for t in tops)) or 'nothing'} at its top, "
                               "not one folder")
        if commit:
            write_atomic(tops[0] / MARKER, f"{commit}\n")
        try:
            tops[0].rename(dest)
        except OSError as e:  # made meanwhile by another set-up
            raise ArchiveError(f"{tarball}: cannot put it in place at {dest}: {e}") from None


def checksums(mirror: Path) -> None:
    """A mirror's SHA256SUMS, where it has one: every file it names must have its sha256 (strict: a line that
    is not `<sha256>  <name>` is an error quoting it)."""
    sums = mirror / SUMS
    if not sums.is_file():
        return
    for line in sums.read_text().splitlines():
        m = SUM_LINE.fullmatch(line)
        if not m:
            raise ArchiveError(f"{sums}: not a `<sha256>  <file>` line: {line!r}")
        f = mirror / m["name"]
        try:
            with open(f, "rb") as fh:
                sha = hashlib.file_digest(fh, "sha256").hexdigest()
        except OSError as e:
            raise ArchiveError(f"{sums} names {m['name']}, which cannot be read: {e}") from None
        if sha != m["sha"]:
            raise ArchiveError(f"{f}: sha256 {sha}, {sums} says {m['sha']}")


@dataclass(frozen=True)
class SourceMirror:
    """A directory of `git archive` tarballs laid out as docs/getting-spack.md says: spack-<tag>.tar.gz,
    spack-packages-<tag>.tar.gz (toolchain.yaml's tags) and NAME-VERSION-src.tar.gz source trees."""

    spack: Path
    packages: Path
    trees: dict[str, tuple[str, Path]]  # package name -> (version, tarball)

    @classmethod
    def read(cls, mirror: Path, pins: dict) -> SourceMirror | None:
        """The mirror's tarballs (checked against its SHA256SUMS); None where it has neither Spack's nor
        spack-packages' tarball; ConfigError where it has one only."""
        spack = mirror / f"spack-{pins['spack']['tag']}.tar.gz"
        packages = mirror / f"spack-packages-{pins['spack_packages']['tag']}.tar.gz"
        if not spack.is_file() and not packages.is_file():
            return None
        if not (spack.is_file() and packages.is_file()):
            raise ConfigError(f"{mirror} has {(spack if spack.is_file() else packages).name} but not "
                              f"{(packages if spack.is_file() else spack).name}: a source mirror holds both")
        checksums(mirror)
        trees = {m["name"]: (m["version"], mirror / m.string)
                 for m in map(SOURCE_TREE.fullmatch, sorted(p.name for p in mirror.iterdir())) if m}
        return cls(spack, packages, trees)


def develop_trees(trees: dict[str, tuple[str, Path]], dest: Path, out: Path) -> None:
    """Each source tree unpacked once under `dest` and registered as a `spack develop` tree of the local env
    in `out` (which spack.yaml includes): Spack builds it with our recipe, checking no archive checksum."""
    dest.mkdir(mode=0o700, exist_ok=True)
    develop = {}
    for name, (version, tarball) in trees.items():
        tree = dest / f"{name}-{version}"
        commit = commit_of(tarball)
        if not tree.is_dir():
            unpack(tarball, tree, commit)
        elif kept_commit(tree) != commit:
            raise ArchiveError(f"{tree} was unpacked from commit {kept_commit(tree)}, {tarball} is {commit}: "
                               "remove the tree to unpack it again")
        develop[name] = {"spec": f"{name}@={version}", "path": str(tree)}
        print(f"setup: {name}@{version} from {tarball} (commit {commit}) in {tree}, a `spack develop` tree of the "
              f"local env")
    write_atomic(out, "# written by `bin/commstack setup --mirror`: the local env builds these trees\n"
                 + yaml.safe_dump({"develop": develop}, sort_keys=False))

