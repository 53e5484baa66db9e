"""A package of the local env (spack.yaml) installed by the pinned Spack for `commstack run`: Spack
set up on the way when there is none, one progress line per package on the terminal, and Spack's
whole output kept in a log. A failure says why (the first Spack error) and what fixes it."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

from commstack.errors import CommstackError
from commstack.paths import TOP
from commstack.spack import Spack, SpackError, environment, find_spack, output
from commstack.spack.preflight import preflight

INSTALL_TIMEOUT = 3600  # OSU builds in minutes; a slow node or a big dependency tree takes longer

INSTALLING = re.compile(r"==> Installing (\S+)-[a-z0-9]{32} \[(\d+)/(\d+)\]")
INSTALLED = re.compile(r"\[\+\] (\S+)(?: \(external (\S+)-[a-z0-9]{32}\))?")
FAILED = re.compile(r"==> Error: (.+)")
HASHED = re.compile(r"-[a-z0-9]{32}$")


class SpackInstallError(CommstackError):
    """Spack could not be set up, or could not install a package of the local env."""


def spack_exe(say: Callable[[str], None]) -> Path:
    """The Spack to use; when there is none, `bin/commstack setup` runs first (the pinned tags online,
    SPACK_ROOT or local copies offline)."""
    exe = find_spack()
    if exe is not None:
        return exe
    from commstack.spack.setup import setup
    say("spack: none set up here; setting up the pinned Spack (bin/commstack setup)")
    try:
        setup()
    except CommstackError as e:
        raise SpackInstallError(f"no Spack here, and setting it up failed: {e}") from None
    exe = find_spack()
    if exe is None:
        raise SpackInstallError("bin/commstack setup ran, yet no Spack is found")
    return exe


def install(package: str, log: Path, say: Callable[[str], None] = print) -> Path:
    """`spack -e <repo> install <package>`, one line per package as it is found or built; returns
    the package's prefix."""
    exe = spack_exe(say)
    missing_externals(Spack(exe, log.parent / "spack-logs"))
    argv = [str(exe), "-e", str(TOP), "install", "--fail-fast", package]
    say(f"spack: installing {package} in the local env (log: {log})")
    log.parent.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    t0 = time.monotonic()
    with open(log, "xb") as out:  # a new run's file: never an old one, never through a symlink
        out.write(f"$ {' '.join(argv)}\n".encode())
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environment())
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            proc.kill()  # our own child, nobody else's

        limit = threading.Timer(INSTALL_TIMEOUT, expire)
        limit.start()
        try:
            for raw in proc.stdout:
                out.write(raw)
                out.flush()
                line = raw.decode(errors="replace").strip()
                if m := INSTALLING.fullmatch(line):
                    say(f"spack: [{m.group(2)}/{m.group(3)}] building {m.group(1)}")
                elif m := INSTALLED.fullmatch(line):
                    prefix, external = m.group(1), m.group(2)
                    say(f"spack: [+] {external} (external in {prefix})" if external else
                        f"spack: [+] {HASHED.sub('', Path(prefix).name)} (in {prefix})")
                elif (m := FAILED.fullmatch(line)) and not errors:  # the first error; the rest follow from it
                    errors.append(m.group(1))
                    say(f"spack: error: {m.group(1)}")
            rc = proc.wait()
        except BaseException:  # Ctrl-C: stop Spack before we go
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
        finally:
            limit.cancel()
    if expired.is_set():
        raise SpackInstallError(f"spack install {package} ran past {INSTALL_TIMEOUT} s and was stopped (log: {log})")
    if rc != 0:
        why = errors[0] if errors else f"exit {rc}"
        raise SpackInstallError(f"spack install {package} failed: {why} (log: {log})")
    prefix = location(exe, package)
    if prefix is None:
        raise SpackInstallError(f"spack installed {package}, yet `spack location -i {package}` does not find it")
    say(f"spack: {package} ready in {prefix} ({time.monotonic() - t0:.0f} s)")
    return Path(prefix)


def missing_externals(spack: Spack) -> None:
    """Stop before `spack install` when an external of the local env has no prefix here: Spack would
    take it as installed and the builds on top of it would fail far from the cause."""
    try:
        checks = preflight(spack, TOP)
    except SpackError as e:
        raise SpackInstallError(f"checking the local env's externals failed: {e}") from None
    gone = [c for c in checks if c.prefix and not Path(c.prefix).is_dir()]
    if gone:
        raise SpackInstallError(
            "external " + ", ".join(f"{c.name}@{c.claims.lstrip('=')} (prefix {c.prefix})" for c in gone)
            + " of the local env is not on this machine; `bin/commstack preflight local` checks every external, "
            "`bin/commstack setup --detect` detects them again")


#: the local env's view (spack.yaml `view:`): what `spack env activate .` puts on PATH
VIEW = TOP / ".spack-env" / "view"


def location(exe: Path, package: str) -> str | None:
    """The local env's install of `package`: its view where the view holds it (Spack keeps each
    linked package's metadata in <view>/.spack/<name>), else `spack location -i`; None when it has
    none (or Spack does not answer)."""
    if (VIEW / ".spack" / package).is_dir():
        return str(VIEW)
    try:
        found = output([str(exe), "-e", str(TOP), "location", "-i", package], 300, SpackError, environment())
    except SpackError:
        return None
    return found.strip() or None
