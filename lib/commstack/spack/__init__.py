"""A small wrapper around the spack command: one log per command, clear errors."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commstack.errors import CommstackError
from commstack.files import write_atomic
from commstack.paths import TOP


#: the one wording of "no Spack", wherever it is said (need_spack, the spack tier's skip, pytest's header)
NO_SPACK = "no Spack found: set SPACK_ROOT to a Spack v1.1 checkout, or run bin/commstack setup"


class SpackError(CommstackError):
    pass


class SpackTimeoutError(SpackError):
    """A Spack command ran past its time limit."""


#: the scripts that run inside `spack python` (package data, next to this module)
SCRIPTS = Path(__file__).parent / "scripts"
#: the Spack root `bin/commstack setup` used (a clone of its own, or SPACK_ROOT's), remembered by the checkout
RECORDED_ROOT = TOP / ".spack" / "spack-root"


def find_spack() -> Path | None:
    """SPACK_ROOT first, then the root setup recorded in this checkout, then its own clone, then PATH."""
    roots = [os.environ["SPACK_ROOT"]] if os.environ.get("SPACK_ROOT") else []
    if RECORDED_ROOT.is_file():
        roots.append(RECORDED_ROOT.read_text().strip())
    candidates = [Path(r) / "bin" / "spack" for r in roots] + [TOP / ".spack" / "spack" / "bin" / "spack"]
    on_path = shutil.which("spack")
    if on_path:
        candidates.append(Path(on_path))
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def environment() -> dict[str, str]:
    """Ours for a Spack process: clingo comes from PyPI in the interpreter running us, no bootstrap download."""
    return {**os.environ, "SPACK_PYTHON": os.environ.get("SPACK_PYTHON", sys.executable)}


def output(argv: list[str], timeout: float, error: type[CommstackError], extra_env: dict | None = None) -> str:
    """stdout of a helper program (a version command, git) in the C locale; a failure or a timeout is `error`,
    naming the command and quoting its last line of stderr."""
    command = f"`{' '.join(argv)}`"
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout,
                              env={**os.environ, "LC_ALL": "C", **(extra_env or {})})
    except subprocess.TimeoutExpired:
        raise error(f"{command} ran past {timeout:.0f} s") from None
    if proc.returncode != 0:
        last = (proc.stderr.decode(errors="replace").strip().splitlines() or ["no stderr"])[-1]
        raise error(f"{command} exited {proc.returncode}: {last}")
    return proc.stdout.decode(errors="replace")


_SEQ = itertools.count()  # log numbers stay unique when several Spack processes run at once


@dataclass
class Spack:
    exe: Path
    log_dir: Path

    def __call__(self, *args: str, env_dir: Path | None = None, check: bool = True,
                 timeout: int = 1800, extra_env: dict | None = None,
                 cwd: Path | None = None) -> subprocess.CompletedProcess:
        argv = [str(self.exe)]
        if env_dir is not None:
            argv += ["-e", str(env_dir)]
        argv += list(args)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        name = "-".join(Path(a).name.strip("-") for a in args[:3])[:60] or "spack"
        log = self.log_dir / f"{next(_SEQ):03d}-{name}.log"
        env = {**environment(), **(extra_env or {})}
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
        except subprocess.TimeoutExpired as e:
            write_atomic(log, f"$ {' '.join(argv)}\n# timed out after {timeout} s\n{e.stdout or ''}\n{e.stderr or ''}")
            raise SpackTimeoutError(f"`{' '.join(argv[1:])}` ran past {timeout} s and was stopped; log: {log}") from None
        write_atomic(log, f"$ {' '.join(argv)}\n# exit {proc.returncode}\n{proc.stdout}\n--- stderr\n{proc.stderr}")
        if check and proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
            raise SpackError(f"`{' '.join(argv[1:])}` failed (exit {proc.returncode}); log: {log}\n{tail}")
        return proc

    def run_script(self, name: str, *args: str, **options: Any) -> Any:
        """What scripts/<name>.py, run in `spack python`, writes to the JSON file named first on its command line."""
        with tempfile.TemporaryDirectory(prefix=f"commstack-{name}-") as tmp:
            out = Path(tmp) / f"{name}.json"
            self("python", str(SCRIPTS / f"{name}.py"), str(out), *args, **options)
            return json.loads(out.read_text())

    def version(self) -> str:
        return self("--version", timeout=60).stdout.strip().split()[0]


def need_spack() -> Spack:
    exe = find_spack()
    if exe is None:
        raise CommstackError(NO_SPACK)
    return Spack(exe, TOP / "results" / "spack-logs")
