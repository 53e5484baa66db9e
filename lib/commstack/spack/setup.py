"""`bin/commstack setup`: the pinned Spack and spack-packages (toolchain.yaml), this repo's package
repository, this machine's externals, and optionally an offline mirror (`commstack mirror create`), written
where every env includes them (docs/getting-spack.md#what-set-up-writes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

from commstack.errors import CommstackError, ConfigError
from commstack.files import write_atomic
from commstack.paths import TOP
from commstack.spack import RECORDED_ROOT, Spack, archive, environment, output
from commstack.spack.mirror import RECORD as MIRROR_RECORD
from commstack.spack.preflight import VersionReadError, read_ucx
from commstack.spack.mirror import signed as mirror_signed
from commstack.spack.trust import check_tree, resolve_trusted

TOOLCHAIN = TOP / "toolchain.yaml"
TEMPLATES = TOP / "containers" / "templates"
#: the local env's `spack develop` trees, from a source mirror's NAME-VERSION-src.tar.gz (spack.yaml includes it)
LOCAL_DEVELOP = TOP / ".spack" / "local-develop.yaml"
GIT_TIMEOUT = 900   # a clone of spack-packages over a slow link
PROBE_TIMEOUT = 60  # `spack --version`

#: what the local env takes from the machine: compilers and MPI, then the usual build tools
#: (`spack external find` searches either named packages or tags, not both at once)
DETECT = (("gcc", "llvm", "openmpi", "mpich", "libfabric"), ("--tag", "build-tools", "--tag", "core-packages"))


class SetupError(CommstackError):
    """Spack or spack-packages cannot be had at the pinned version."""


def setup(spack_source: str | None = None, packages: str | None = None, force: bool = False,
          detect: bool = False, mirror: str | None = None) -> int:
    p = yaml.safe_load(TOOLCHAIN.read_text())
    # --mirror DIR: a source mirror (Spack's and spack-packages' tarballs, package source trees), a mirror
    # made by `commstack mirror create` (package sources and binaries), or both in one; a wrong DIR fails first
    where = Path(mirror).resolve() if mirror else None
    if where:  # its tarballs' code and its signed build cache's keys are trusted from here: another user's would be
        check_tree(where, "--mirror")
    sources = archive.SourceMirror.read(where, p) if where else None
    made = bool(where and (where / MIRROR_RECORD).is_file())
    if where and not (sources or made):
        raise ConfigError(f"--mirror {where}: neither a source mirror (spack-{p['spack']['tag']}.tar.gz, "
                          f"spack-packages-{p['spack_packages']['tag']}.tar.gz) nor a mirror made by "
                          f"`bin/commstack mirror create` ({MIRROR_RECORD})")
    signed = mirror_signed(where) if made else False
    options = {"spack": "--spack-source" if spack_source else "--mirror",
               "packages": "--packages" if packages else "--mirror"}
    if sources:  # an option given as well wins over the mirror's tarball
        spack_source, packages = spack_source or str(sources.spack), packages or str(sources.packages)
    commits = {}  # a tarball is checked, its owner and its pinned commit, before anything is written
    for what, f, pin in (("spack", spack_source, p["spack"]), ("packages", packages, p["spack_packages"])):
        if f and Path(f).is_file():  # a tarball's commit header is easy to forge: its code is its owner's
            resolve_trusted(Path(f), options[what])
            commits[what] = archive.check_commit(Path(f), pin, options[what])
    want = p["spack"]["tag"].lstrip("v")
    dest = TOP / ".spack"
    dest.mkdir(exist_ok=True)
    # --packages: a checkout is used in place (its commit verified); a tarball is unpacked, anything else (a
    # local git mirror) is cloned from
    given = Path(packages) if packages else None
    in_place = bool(given and (given / p["spack_packages"]["builtin"]).is_dir())
    if in_place:  # its package.py files run as us, whoever concretizes or installs
        check_tree(given, "--packages")
        verify(p["spack_packages"], given, "--packages", force)
    spack_root = os.environ.get("SPACK_ROOT")
    if spack_root:
        exe = Path(spack_root) / "bin" / "spack"
        if not exe.is_file():
            raise SetupError(f"SPACK_ROOT={spack_root} has no bin/spack")
        for code in ("bin", "lib", "etc", "share"):  # Spack's own code and config, run as us from now on
            if (Path(spack_root) / code).exists():
                check_tree(Path(spack_root) / code, "SPACK_ROOT")
        verify(p["spack"], Path(spack_root), "SPACK_ROOT", force)
        found = output([str(exe), "--version"], PROBE_TIMEOUT, SetupError).split()[0]
        print(f"setup: using Spack {found} at {spack_root} (pinned: {want})")
        if found.split(".")[:2] != want.split(".")[:2] and not force:
            raise SetupError(f"SPACK_ROOT has Spack {found}, commstack is pinned to {want} "
                             f"(major.minor differ); use --force to go on anyway")
    else:
        exe = dest / "spack" / "bin" / "spack"
        checkout(p["spack"], dest / "spack", spack_source, exe.is_file(), commits.get("spack"))
    if in_place:
        tree = given
    else:
        tree = dest / "spack-packages"
        checkout(p["spack_packages"], tree, packages, (tree / p["spack_packages"]["builtin"]).is_dir(),
                 commits.get("packages"))
    builtin = (tree / p["spack_packages"]["builtin"]).resolve()
    # every env includes this file (optional), so builtin is our pinned checkout, never a download;
    # commstack is in it too for commands outside an env (`spack -C .spack ...`)
    repos = {"commstack": str(TOP / "repo" / "spack_repo" / "commstack"), "builtin": str(builtin)}
    write_atomic(dest / "repos.yaml", yaml.safe_dump({"repos": repos}, sort_keys=False))
    spack = Spack(exe, TOP / "results" / "spack-logs")
    root = exe.parent.parent.absolute()
    write_atomic(RECORDED_ROOT, f"{root}\n")  # later commands find it without SPACK_ROOT (commstack.spack)
    print(f"setup: Spack {spack.version()} ready at {root}, recorded in {RECORDED_ROOT} for later commands "
          "(SPACK_ROOT overrides it)\n"
          # Spack on PATH as `spack`, on the venv's Python, whose clingo spares Spack its bootstrap
          f"setup: to use it by hand: export SPACK_PYTHON={environment()['SPACK_PYTHON']}; "
          f". {root}/share/spack/setup-env.sh\n"
          f"setup: repos in {dest / 'repos.yaml'}: commstack={repos['commstack']}, builtin={builtin}")
    register_user_scope(spack, builtin)
    if made:
        use_mirror(spack, where, dest / "mirrors.yaml", signed)
    if sources and sources.trees:
        archive.develop_trees(sources.trees, dest / "sources", LOCAL_DEVELOP)
    externals = dest / "externals.yaml"
    if detect or not externals.exists():
        detect_externals(spack, externals)
    return 0


def register_user_scope(spack: Spack, builtin: Path) -> None:
    """What a plain `spack` outside our envs needs, in Spack's user scope: the pinned builtin as a path, and our
    Containerfile templates before Spack's own (why: docs/getting-spack.md#what-set-up-writes)."""
    if "SPACK_DISABLE_LOCAL_CONFIG" in os.environ:  # Spack then has no user scope
        print("setup: SPACK_DISABLE_LOCAL_CONFIG is set: Spack's user scope left alone (our envs name the builtin "
              "repo and, in envs/images/*, `spack -e . containerize` finds the templates without it)")
        return
    # the user scope is optional in Spack: it exists once its directory does
    user = Path(spack("python", "-c", "import spack.paths; print(spack.paths.user_config_path)",
                      timeout=PROBE_TIMEOUT).stdout.strip())
    user.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:  # `config add PATH` would make a list: a file keeps a string
        repos = Path(scratch) / "repos.yaml"
        repos.write_text(yaml.safe_dump({"repos": {"builtin": str(builtin)}}))
        spack("config", "--scope", "user", "add", "-f", str(repos), timeout=PROBE_TIMEOUT)
    print(f"setup: the pinned builtin {builtin} in Spack's user scope ({user / 'repos.yaml'}): a plain `spack` "
          "outside an env reads it, not a clone under ~/.spack/package_repos")
    if not TEMPLATES.is_dir():  # commstack inside an image has no containers/
        print(f"setup: no {TEMPLATES}: Containerfile templates not registered")
        return
    entry = f"config:template_dirs:{TEMPLATES}"
    spack("config", "--scope", "user", "add", entry, timeout=PROBE_TIMEOUT)  # prepends, once
    print(f"setup: Containerfile templates {TEMPLATES} registered in Spack's user scope "
          f"({user / 'config.yaml'}), for a plain `spack containerize` in envs/images/*; "
          f"undo: spack config --scope user remove {entry}")


def use_mirror(spack: Spack, mirror: Path, out: Path, signed: bool | None = None) -> None:
    """Every env takes sources (and binaries, when the mirror has a build cache) from `mirror` first,
    as stackinator's mirrors.yaml does; a signed cache's keys are trusted from the mirror itself."""
    signed = mirror_signed(mirror) if signed is None else signed
    conf = {"mirrors": {"commstack-offline": {"url": mirror.as_uri(), "signed": signed}}}
    write_atomic(out, "# written by `bin/commstack setup --mirror`; every env includes it\n"
                 + yaml.safe_dump(conf, sort_keys=False))
    if signed:
        spack("-C", str(out.parent), "buildcache", "keys", "--install", "--trust", timeout=300)
    print(f"setup: mirror {mirror} in {out} (" + ("signed build cache, keys trusted)" if signed else "sources)"))


def detect_externals(spack: Spack, out: Path) -> None:
    """`spack external find` into a scratch user scope, kept as the local env's externals.yaml."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {"SPACK_USER_CONFIG_PATH": scratch}
        for what in DETECT:
            spack("-C", str(out.parent), "external", "find", "--scope", "user", *what, extra_env=env, timeout=600)
        found = Path(scratch) / "packages.yaml"
        if not found.exists():
            raise SetupError("spack external find detected nothing (no compiler, no MPI?)")
        conf = yaml.safe_load(found.read_text())
    for entry in conf["packages"].values():  # one install found twice, through two PATH entries that are one
        # directory (/bin -> /usr/bin): `spack audit configs` calls that "Multiple externals share the same spec"
        found_twice = entry.get("externals") or []
        entry["externals"] = [e for i, e in enumerate(found_twice) if e not in found_twice[:i]]
    conf["packages"].update(detect_ucx())
    write_atomic(out, "# written by `bin/commstack setup` (spack external find, ucx_info); --detect redoes it\n"
                 + yaml.safe_dump(conf, sort_keys=False, width=1 << 16))  # one line a spec, as Spack writes
    names = sorted(conf["packages"])
    print(f"setup: {len(names)} externals of this machine in {out}: {', '.join(names)}")


def detect_ucx() -> dict:
    """This machine's UCX as an external ({} where it has no ucx_info on PATH): builtin's recipe has no
    detection, so its version is `ucx_info -v`'s (preflight's reader), its prefix ucx_info's bin/'s parent."""
    exe = shutil.which("ucx_info")
    if exe is None:
        return {}
    prefix = Path(exe).resolve().parent.parent
    try:
        version = read_ucx(prefix).version
    except VersionReadError as e:
        raise SetupError(f"this machine's UCX: {e}") from None
    return {"ucx": {"externals": [{"spec": f"ucx@{version}", "prefix": str(prefix)}]}} if version else {}


def checkout(pin: dict, dest: Path, local: str | None, present: bool, archived: str | None = None) -> None:
    """The pinned tag at dest: unpacked from a tarball of the pinned commit (`archived`, checked already) or
    cloned, when missing; when present (kept from an earlier setup), its commit is verified against the
    pinned one all the same."""
    if not present and archived:
        if dest.exists():
            raise SetupError(f"{dest} exists but holds no Spack tree: remove it to unpack {local} there")
        archive.unpack(Path(local), dest, archived)
        print(f"setup: {local} (commit {archived}) unpacked into {dest}")
    elif not present:
        source = local or pin["url"]
        print(f"setup: cloning {source} at {pin['tag']} into {dest}")
        try:
            # --no-local: a local mirror's objects come through the pack protocol, each hashed and checked
            # (fsckObjects), never hardlinked: its owner cannot change them under the commit verified below
            output(["git", "-c", "transfer.fsckObjects=true", "clone", "-q", "--no-local", "--depth=1", "--branch",
                    pin["tag"], source, str(dest)], GIT_TIMEOUT, SetupError)
        except SetupError as e:
            raise SetupError(
                f"cannot clone {source} ({e})."
                " Offline? Either point SPACK_ROOT at an existing Spack "
                f"{pin['tag']}, or give local copies: bin/commstack setup --spack-source /path/to/spack.git "
                "--packages /path/to/spack-packages (a checkout or local git mirror), or --mirror DIR "
                "(a directory of their `git archive` tarballs).") from None
    head, state = _commit(dest)
    if not head.startswith(pin["commit"]):
        kept = "a tree unpacked by an earlier setup: remove it to unpack again" if archive.kept_commit(dest) \
            else "a checkout kept from an earlier setup: remove it to clone again"
        raise SetupError(f"{dest}: {state}, toolchain.yaml pins {pin['tag']} = {pin['commit']}"
                         + (f" ({kept})" if present else ""))


def verify(pin: dict, tree: Path, what: str, force: bool) -> None:
    """A tree given for a pin (SPACK_ROOT, --packages): a git checkout, or a tree an earlier set-up unpacked
    from a tarball, must be at the pinned commit (--force: said, and used); any other directory (a copy of
    unknown origin) cannot be verified, and is used, saying so."""
    if archive.kept_commit(tree) is None:
        top = subprocess.run(["git", "-C", str(tree), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=PROBE_TIMEOUT)
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != tree.resolve():  # not one, or inside another
            print(f"setup: {what} {tree}: unverified: not a git checkout (pinned: {pin['tag']} = {pin['commit']})")
            return
    head, state = _commit(tree)
    if head.startswith(pin["commit"]):
        return
    mismatch = f"{what} {tree}: {state}, toolchain.yaml pins {pin['tag']} = {pin['commit']}"
    if not force:
        raise SetupError(f"{mismatch}; check out {pin['tag']} there, or use --force to go on anyway")
    print(f"setup: {mismatch}; used anyway (--force)")


def _commit(tree: Path) -> tuple[str, str]:
    """The commit of a tree, and how it is known: the tarball's it was unpacked from, else its git HEAD."""
    kept = archive.kept_commit(tree)
    if kept:
        return kept, f"unpacked from commit {kept}"
    head = output(["git", "-C", str(tree), "rev-parse", "HEAD"], PROBE_TIMEOUT, SetupError).strip()
    return head, f"HEAD is {head}"
