"""`bin/commstack preflight ENV`: before `spack install` on a real system, does every external the
env names exist here (prefix or module), at the version it claims?"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from commstack.paths import TOP
from commstack.spack import Spack, script
from commstack.spack.envs import PURPOSE, env_dir


@dataclass
class ExternalCheck:
    name: str
    claims: str
    prefix: str | None
    modules: list[str]
    problems: list[str]
    found: list[str] | None  # versions Spack's detection found at the prefix; None: not checked
    note: str | None = None

    def line(self) -> str:
        where = self.prefix or ", ".join(self.modules) or "?"
        seen = f" (found {', '.join(self.found)})" if self.found else ""
        state = "FAIL: " + "; ".join(self.problems) if self.problems else "ok" + seen
        return f"{self.name}@{self.claims} at {where}: {state}"


def preflight(spack: Spack, env: Path) -> list[ExternalCheck]:
    """Check every external an env uses exists on this machine (prefix or module, and version)."""
    with tempfile.TemporaryDirectory(prefix="commstack-preflight-") as tmp:
        out = Path(tmp) / "preflight.json"
        spack("python", str(script("preflight")), str(out), env_dir=env, timeout=600)
        return [ExternalCheck(**r) for r in json.loads(out.read_text())]


def run(spack: Spack, name: str) -> int:
    print(f"preflight {name}: {PURPOSE[name]}")
    checks = preflight(spack, TOP / env_dir(name))
    for c in checks:
        print(f"  {c.line()}")
    missing = [c for c in checks if c.problems]
    print(f"preflight {name}: {len(checks)} externals, "
          + (f"{len(missing)} missing: {', '.join(c.name for c in missing)}" if missing else "all present"))
    return 1 if missing else 0
