"""An env someone else could have changed runs nothing as us: before Spack reads an env given by path, it and
everything it names (read from its YAML, never by Spack, which would import package code) must belong to root
or to us and be writable by nobody else, as must every directory and symlink on the way (OpenSSH's StrictModes
rule). The rules, the group-write exception and the fixes: docs/harness.md ("Whose env")."""

from __future__ import annotations

import functools
import grp
import os
import pwd
import re
import stat
from pathlib import Path
from typing import Any, Iterator

from commstack.errors import CommstackError
from commstack.files import MAX_LINKS
from commstack.spack import find_spack
from commstack.yamlfile import read_yaml


class UntrustedPathError(CommstackError):
    """A file of an env (or of its view) belongs to another user or can be written by group or others."""


#: entries of one checked tree (a package repository, the no-driver stubs): a bound on the walk
MAX_TREE = 500_000
#: include levels followed (an included file may include more)
MAX_INCLUDES = 64
#: where Spack keeps an env's own state (the view's link, the repositories of `--use-env-repo`)
ENV_SUBDIR = ".spack-env"


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@functools.lru_cache(maxsize=64)
def _group_of(gid: int) -> frozenset[str]:
    """Who is in group `gid`: its members and the users whose primary group it is (a user-private group holds
    only its user, root's only root: their group write bit opens the file to nobody else)."""
    try:
        members = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        return frozenset({f"gid {gid}"})
    return frozenset(members | {u.pw_name for u in pwd.getpwall() if u.pw_gid == gid})


def _refuse(what: str, path: Path, st: os.stat_result, why: str, fix: str) -> UntrustedPathError:
    return UntrustedPathError(
        f"{what}: {path} {why} (owner {_user(st.st_uid)}, uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}); commstack runs "
        f"nothing another user could have changed: {fix}, or copy it into a directory of your own")


def _check_entry(what: str, path: Path, st: os.stat_result, last: bool) -> None:
    if st.st_uid not in (0, os.geteuid()):
        raise _refuse(what, path, st, "belongs to another user", f"`chown {_user(os.geteuid())} {path}`")
    if stat.S_ISLNK(st.st_mode):
        return  # a link's own mode means nothing: its directory, checked, says who may replace it
    sticky_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and not last
    writers = st.st_mode & (0o002 if _group_of(st.st_gid) <= {_user(0), _user(os.geteuid())} else 0o022)
    if writers and not sticky_dir:
        raise _refuse(what, path, st, "is writable by group or others", f"`chmod go-w {path}`")


def resolve_trusted(path: Path, what: str) -> Path:
    """`path` resolved one name at a time from / without following a symlink unchecked: every directory on
    the way, every symlink and the path itself belong to root or to us and are writable by nobody else (a
    directory on the way may be other-writable with the sticky bit). UntrustedPathError names the first that
    is not; FileNotFoundError where it is missing."""
    todo, at, links = list(reversed(Path(os.path.abspath(path)).parts[1:])), Path("/"), 0
    _check_entry(what, at, os.lstat(at), not todo)
    while todo:
        name = todo.pop()
        if name == "..":  # pathlib's parts hold no "" or "."
            at = at.parent
            continue
        here = at / name
        st = os.lstat(here)
        _check_entry(what, here, st, not todo)
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > MAX_LINKS:
                raise UntrustedPathError(f"{what}: {path}: more than {MAX_LINKS} symlinks on the way")
            target = Path(os.readlink(here))
            if target.is_absolute():
                at = Path("/")
            todo.extend(reversed(target.parts[1:] if target.is_absolute() else target.parts))
            continue
        at = here
    return at


def check_tree(path: Path, what: str) -> None:
    """`path` (resolve_trusted) and, where it is a directory, everything below it: each entry ours or root's and
    writable by nobody else, each symlink's target checked the same way."""
    seen = 0
    todo = [resolve_trusted(path, what)]
    while todo:
        top = todo.pop()
        if not top.is_dir():
            continue
        with os.scandir(top) as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_TREE:
                    raise UntrustedPathError(f"{what}: {path}: more than {MAX_TREE} files to check")
                here = Path(entry.path)
                st = entry.stat(follow_symlinks=False)
                _check_entry(what, here, st, True)
                if stat.S_ISLNK(st.st_mode):
                    try:
                        todo.append(resolve_trusted(here, what))
                    except FileNotFoundError:
                        continue  # a dangling link leads nowhere Spack could read
                elif stat.S_ISDIR(st.st_mode):
                    todo.append(here)


def check_env(env: Path) -> None:
    """The env directory `env` and everything of it Spack reads, checked before Spack reads any of it (a missing
    env is load_env's to name)."""
    what = f"env {env}"
    try:
        env = resolve_trusted(env, what)
    except FileNotFoundError:
        return
    try:
        for name in ("spack.yaml", "spack.lock"):
            if os.path.lexists(env / name):
                resolve_trusted(env / name, f"{what}: its {name}")
        if not (env / "spack.yaml").is_file():
            return  # not an env: load_env says so
        if os.path.lexists(env / ENV_SUBDIR):
            resolve_trusted(env / ENV_SUBDIR, f"{what}: its {ENV_SUBDIR}")
            if os.path.lexists(env / ENV_SUBDIR / "repos"):
                check_tree(env / ENV_SUBDIR / "repos", f"{what}: its {ENV_SUBDIR}/repos")
        manifest = read_yaml(env / "spack.yaml", aliases=True)
        top = manifest.get("spack") if isinstance(manifest, dict) else None
        if not isinstance(top, dict):
            return  # Spack refuses it, reading no package code
        for kind, found in _named(env, env, top, what, 0):
            check_tree(found, f"{what}: {kind} {found}")
        for view in _views(env, top.get("view", True), what):
            if os.path.lexists(view):
                resolve_trusted(view, f"{what}: its view root")
    except FileNotFoundError as e:
        raise UntrustedPathError(f"{what}: {e.filename} does not exist (a dangling link?), so cannot be checked") \
            from None


def _views(env: Path, view: Any, what: str) -> list[Path]:
    """The view roots spack.yaml asks for: `view: true` (the default: .spack-env/view), a path, or views by name."""
    if view is True:
        return [env / ENV_SUBDIR / "view"]
    if isinstance(view, str):
        return [_path(env, env, view, what, "view")]
    if isinstance(view, dict):
        return [_path(env, env, v["root"], what, "view") for v in view.values()
                if isinstance(v, dict) and isinstance(v.get("root"), str)]
    return []


def _named(env: Path, base: Path, sections: dict, what: str, depth: int) -> Iterator[tuple[str, Path]]:
    """(what it is, its path) for every included file and directory, package repository and extension the
    config `sections` name, following includes into the files they include."""
    if depth > MAX_INCLUDES:
        raise UntrustedPathError(f"{what}: includes nested more than {MAX_INCLUDES} deep")
    sections = {str(k).rstrip(":"): v for k, v in sections.items()}  # `repos::` overrides, and names the same section
    for item in sections.get("include") or []:
        path, optional = _include(item, what)
        found = _path(env, base, path, what, "include")
        if not os.path.lexists(found):
            if optional:
                continue
            raise UntrustedPathError(f"{what}: its include {path} does not exist")
        yield "include", found
        real = resolve_trusted(found, f"{what}: include {found}")
        files = sorted(real.glob("*.yaml")) if real.is_dir() else [real]
        for file in files:
            data = read_yaml(file, aliases=True)
            if isinstance(data, dict):
                yield from _named(env, file.parent, data, what, depth + 1)
    repos = sections.get("repos") or []
    for name, repo in (repos.items() if isinstance(repos, dict) else enumerate(repos)):
        if not isinstance(repo, str):
            raise UntrustedPathError(f"{what}: repository {name} is not a local path ({repo!r}): commstack cannot "
                                     "check what Spack would fetch; name a checkout of your own instead")
        yield "repository", _path(env, base, repo, what, "repository")
    config = sections.get("config")
    for extension in (config.get("extensions") or []) if isinstance(config, dict) else []:
        yield "extension", _path(env, base, str(extension), what, "extension")


def _include(item: Any, what: str) -> tuple[str, bool]:
    if isinstance(item, str):
        return item, False
    if isinstance(item, dict) and isinstance(item.get("path"), str):
        override = os.environ.get(str(item.get("path_override_env_var") or ""))
        return override or item["path"], bool(item.get("optional"))
    raise UntrustedPathError(f"{what}: include {item!r} is not a local path: commstack cannot check what Spack "
                             "would fetch; copy the file into the env")


def _path(env: Path, base: Path, path: str, what: str, kind: str) -> Path:
    """A path of the env's config (relative: to the file that names it) as Spack reads it: $env, $spack,
    environment variables, ~; one that names another of Spack's variables (or a URL) cannot be checked, and is
    refused."""
    exe = find_spack()
    values = {"env": str(env), "spack": str(exe.parent.parent) if exe else None}
    text = re.sub(r"\$(?:\{(env|spack)\}|(env|spack)\b)", lambda m: values[(m[1] or m[2]).lower()] or m[0], path,
                  flags=re.IGNORECASE)
    text = os.path.expanduser(os.path.expandvars(text))
    if "$" in text or "://" in text:
        raise UntrustedPathError(f"{what}: {kind} {path}: commstack cannot tell which path Spack makes of it, so "
                                 "cannot check it; write the path out")
    return base / text
