"""The repo's Spack environments: concretize copies of them (in parallel), read and diff locks.

Every check works on a staged copy of the repo's Spack files, so a failed check modifies
nothing in the repository. Facts come from the concrete specs, never from exit statuses.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from commstack.errors import ConfigError
from commstack.paths import TOP
from commstack.spack import Spack, SpackError

#: env name -> its directory, relative to the repo root
ENVS = {"local": Path("."), "gh200-ompi": Path("envs/gh200-ompi"), "gh200-cray": Path("envs/gh200-cray"),
        **{f"images/{p.parent.name}": Path("envs/images") / p.parent.name
           for p in sorted((TOP / "envs" / "images").glob("*/spack.yaml"))}}
#: envs whose spack.lock is committed; local's externals are detected per machine, so its lock
#: would only describe the machine that made it
LOCKED = ("gh200-ompi", "gh200-cray")

# Runs inside `spack -e <env> python`: the active env's config scopes are in effect.
DUMP = r'''
import json, sys, time
import spack.environment as ev
env = ev.active_environment()
start = time.perf_counter()
env.concretize(force=True)
seconds = time.perf_counter() - start
env.write(regenerate=False)
nodes = {}
for spec in env.all_specs():
    nodes[spec.dag_hash()] = {
        "name": spec.name, "version": str(spec.version), "namespace": spec.namespace,
        "target": str(spec.target), "os": str(spec.os), "external": spec.external,
        "prefix": spec.external_path if spec.external else None, "hash": spec.dag_hash(),
        "variants": {k: v.value if isinstance(v.value, bool) else
                     (sorted(str(x) for x in v.value) if isinstance(v.value, tuple) else str(v.value))
                     for k, v in spec.variants.items()},
        "deps": sorted({d.name for d in spec.dependencies()})}
roots = [s.name for s in env.concrete_roots()]
json.dump({"seconds": seconds, "roots": roots, "nodes": list(nodes.values())}, open(sys.argv[1], "w"))
'''


class EnvError(SpackError):
    """An env failed to concretize; names the env and the lines of its files that are at fault."""


@dataclass
class Concrete:
    name: str
    copy: Path            # the staged env directory, holding the new spack.lock
    seconds: float        # wall time of the whole `spack python` process
    solve_seconds: float  # env.concretize() alone
    roots: list[str]
    nodes: list[dict]

    def one(self, name: str) -> dict:
        hits = [n for n in self.nodes if n["name"] == name]
        if len(hits) != 1:
            raise AssertionError(f"{self.name}: expected one {name} node, got {len(hits)}")
        return hits[0]

    def names(self) -> list[str]:
        return [n["name"] for n in self.nodes]

    @property
    def lock(self) -> Path:
        return self.copy / "spack.lock"


def env_dir(name: str) -> Path:
    if name not in ENVS:
        raise ConfigError(f"unknown env {name!r}; known: {', '.join(ENVS)}")
    return ENVS[name]


def stage(dest: Path) -> Path:
    """Copy what the envs read (spack.yaml, envs/, repo/, the set-up's .spack/*.yaml) to dest."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(TOP / "spack.yaml", dest / "spack.yaml")
    ignore = shutil.ignore_patterns(".spack-env", "spack.lock", "__pycache__")
    for sub in ("envs", "repo"):
        shutil.copytree(TOP / sub, dest / sub, ignore=ignore, dirs_exist_ok=True)
    if (TOP / ".git").exists() and not (dest / ".git").exists():
        (dest / ".git").symlink_to(TOP / ".git")  # mpi-pingpong's recipe fetches from this git history
    (dest / ".spack").mkdir(exist_ok=True)
    for f in (TOP / ".spack").glob("*.yaml"):
        shutil.copy(f, dest / ".spack" / f.name)
    return dest


def concretize(spack: Spack, name: str, staged: Path, options: tuple[str, ...] = (),
               extra_env: dict | None = None) -> Concrete:
    """One env of a staged copy, in its own Spack process (options: extra `spack -c` settings)."""
    copy = staged / env_dir(name)
    out = copy / "concrete.json"
    start = time.perf_counter()
    proc = spack(*options, "python", str(staged / "dump.py"), str(out), env_dir=copy, check=False,
                 timeout=1800, extra_env=extra_env)
    seconds = time.perf_counter() - start
    if proc.returncode != 0 or not out.exists():
        raise EnvError(f"env {name}: concretization failed (exit {proc.returncode})\n"
                       + explain(proc.stderr, staged, env_dir(name)))
    data = json.loads(out.read_text())
    return Concrete(name, copy, seconds, data["seconds"], data["roots"], data["nodes"])


def concretize_all(spack: Spack, names: list[str], staged: Path, workers: int = 0,
                   options: tuple[str, ...] = (), extra_env: dict | None = None) -> dict[str, Concrete]:
    """Concretize several envs of one staged copy, `workers` Spack processes at a time (0: all)."""
    (staged / "dump.py").write_text(DUMP)
    with ThreadPoolExecutor(max_workers=workers or len(names)) as pool:
        futures = {n: pool.submit(concretize, spack, n, staged, options, extra_env) for n in names}
        return {n: f.result() for n, f in futures.items()}


def explain(stderr: str, root: Path, env: Path) -> str:
    """Spack's error lines, plus each line of the env's files that names what the error quotes."""
    errors = [line for line in stderr.splitlines() if line.strip() and "Warning" not in line][-12:]
    quoted = set(re.findall(r"['\"`]([\w.@+~=:%^-]+)['\"`]", "\n".join(errors)))
    words = {w for q in quoted for w in (q, q.split("@")[0].split("+")[0]) if len(w) > 2}
    files = [root / env / "spack.yaml", *sorted((root / "envs" / "common").glob("*.yaml"))]
    culprits = []
    for f in files:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if any(re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", code) for w in words):
                culprits.append(f"  {f.relative_to(root)}:{i}: {line.strip()}")
    return "\n".join(errors + (["offending lines:", *culprits] if culprits else []))


# ---- locks -------------------------------------------------------------------------------------

def lock_nodes(lock: Path) -> dict[str, dict]:
    """A spack.lock's concrete specs by name: version, variants, arch, external prefix, hash."""
    data = json.loads(lock.read_text())
    nodes = {}
    for h, spec in data["concrete_specs"].items():
        arch = spec.get("arch", {})
        target = arch.get("target")
        nodes.setdefault(spec["name"], []).append({
            "hash": h[:7], "version": str(spec.get("version")),
            "arch": f"{arch.get('os')}-{target['name'] if isinstance(target, dict) else target}",
            "variants": {k: v for k, v in spec.get("parameters", {}).items()
                         if k not in ("cflags", "cxxflags", "fflags", "cppflags", "ldflags", "ldlibs")},
            "external": (spec.get("external") or {}).get("path")})
    return {name: sorted(v, key=lambda n: n["hash"]) for name, v in nodes.items()}


def lock_diff(old: Path, new: Path) -> list[str]:
    """Readable differences between two locks: package, old -> new version/variant/arch/hash."""
    a, b = lock_nodes(old), lock_nodes(new)
    lines = []
    for name in sorted(set(a) | set(b)):
        if name not in b:
            lines.append(f"- {name}: removed ({', '.join(n['version'] for n in a[name])})")
            continue
        if name not in a:
            lines.append(f"+ {name}: added ({', '.join(n['version'] for n in b[name])})")
            continue
        for x, y in zip(a[name], b[name]):
            if x == y:
                continue
            what = [f"{k} {x[k]} -> {y[k]}" for k in ("version", "arch", "external") if x[k] != y[k]]
            for k in sorted(set(x["variants"]) | set(y["variants"])):
                if x["variants"].get(k) != y["variants"].get(k):
                    what.append(f"{k}={x['variants'].get(k)} -> {y['variants'].get(k)}")
            what.append(f"hash {x['hash']} -> {y['hash']}")
            lines.append(f"~ {name}: " + ", ".join(what))
        if len(a[name]) != len(b[name]):
            lines.append(f"~ {name}: {len(a[name])} -> {len(b[name])} nodes")
    return lines


# ---- preflight ---------------------------------------------------------------------------------

# Runs inside `spack -e <env> python`: each external the env uses (its concrete DAG when locked,
# else every external its config declares), whether its prefix or modules exist, and the version
# Spack's own detection finds at the prefix.
PREFLIGHT = r'''
import json, os, shutil, sys
import spack.config, spack.detection, spack.environment as ev, spack.spec
from spack.util.module_cmd import module
env = ev.active_environment()
nodes = [s for s in env.all_specs() if s.external]
if not nodes:
    for name, conf in spack.config.get("packages").items():
        for ext in conf.get("externals", []) if isinstance(conf, dict) else []:
            s = spack.spec.Spec(ext["spec"])
            s.name = s.name or name
            s.external_path, s.external_modules = ext.get("prefix"), ext.get("modules")
            nodes.append(s)
has_module_cmd = bool(os.environ.get("MODULESHOME") or shutil.which("modulecmd"))
out = []
for s in nodes:
    r = {"name": s.name, "claims": str(s.versions), "prefix": s.external_path,
         "modules": s.external_modules or [], "problems": [], "found": None}
    if s.external_path and not os.path.isdir(s.external_path):
        r["problems"].append(f"prefix {s.external_path} does not exist")
    for m in r["modules"]:
        if not has_module_cmd:
            r["problems"].append(f"module {m}: no module command here to check it")
        elif not module("show", m).strip():
            r["problems"].append(f"module {m} not found")
    if s.external_path and os.path.isdir(s.external_path) and not r["problems"]:
        try:
            found = spack.detection.by_path([s.name], path_hints=[s.external_path]).get(s.name, [])
        except Exception as e:
            found, r["note"] = [], f"detection failed: {e}"
        versions = sorted({str(getattr(f, "spec", f).versions) for f in found})
        r["found"] = versions
        if versions and not any(spack.spec.Spec(f"{s.name}@{v}").intersects(f"{s.name}@{s.versions}") for v in versions):
            r["problems"].append(f"claims @{s.versions}, {s.external_path} has {', '.join(versions)}")
    out.append(r)
json.dump(sorted(out, key=lambda r: r["name"]), open(sys.argv[1], "w"))
'''


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
    script = Path(tempfile.mkdtemp(prefix="commstack-preflight-")) / "preflight.py"
    script.write_text(PREFLIGHT)
    out = script.with_suffix(".json")
    spack("python", str(script), str(out), env_dir=env)
    return [ExternalCheck(**r) for r in json.loads(out.read_text())]
