"""`bin/commstack mirror create ENV [DIR]`: everything an env needs, for a site without network: the sources of
its concrete specs and, with a GPG key, a signed build cache (docs/environments.md#air-gapped-sites-a-mirror)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import yaml

from commstack.errors import ConfigError
from commstack.files import write_atomic
from commstack.paths import TOP
from commstack.spack import Spack
from commstack.spack.envs import LOCKED, env_dir, stage

RECORD = "commstack-mirror.yaml"


def create(spack: Spack, name: str, dest: Path | None = None, key: str | None = None,
           staged: Path | None = None) -> Path:
    """Make the mirror of env `name` (of the staged copy `staged`, else of a fresh one) in `dest`
    (default: results/mirror-<env>)."""
    dest = (dest or TOP / "results" / f"mirror-{name.replace('/', '-')}").resolve()
    if dest.exists() and any(dest.iterdir()) and not (dest / RECORD).is_file():
        raise ConfigError(f"{dest} is not empty and not a commstack mirror: choose another DIR")
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="commstack-mirror-") as tmp:
        root = staged or stage(Path(tmp))
        env = root / env_dir(name)
        if name in LOCKED and not (env / "spack.lock").exists():
            shutil.copy(TOP / env_dir(name) / "spack.lock", env / "spack.lock")  # exactly the locked specs
        elif not (env / "spack.lock").exists():
            spack("concretize", env_dir=env, timeout=1800)
        proc = spack("mirror", "create", "--all", "-d", str(dest), env_dir=env, timeout=3600)
        pushed = []
        if key:
            spack("buildcache", "push", "--key", key, "--update-index", "--only", "package,dependencies",
                  str(dest), env_dir=env, timeout=3600)
            pushed = sorted(p.name for p in dest.rglob("*.spec.manifest.json"))
    record = {"env": name, "sources": proc.stdout.strip().splitlines()[-1:] or [""],
              "build_cache": {"signed_with": key, "specs": len(pushed)} if key else None}
    write_atomic(dest / RECORD, yaml.safe_dump(record, sort_keys=False))
    print(f"mirror {name}: {dest}\n  {record['sources'][0]}"
          + (f"\n  build cache: {len(pushed)} specs signed with {key}" if key else "")
          + f"\n  offline: bin/commstack setup --mirror {dest}")
    return dest


def signed(mirror: Path) -> bool:
    """Whether a mirror made by create() holds a signed build cache."""
    record = mirror / RECORD
    if not record.is_file():
        raise ConfigError(f"{mirror} has no {RECORD}: not a mirror made by `bin/commstack mirror create`")
    return bool((yaml.safe_load(record.read_text()).get("build_cache") or {}).get("signed_with"))
