"""The repo's Spack environments: concretize copies of them (in parallel), read and diff locks.

Every check works on a staged copy of the repo's Spack files, so a failed check modifies
nothing in the repository. Facts come from the concrete specs, never from exit statuses.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from commstack import exits
from commstack.errors import ConfigError
from commstack.paths import TOP
from commstack.files import write_atomic
from commstack.spack import SCRIPTS, Spack, SpackError

#: each env by name, and where it is installed: the images' userland is not the login nodes' (docs/environments.md)
PURPOSE = {
    "local": "this machine (workstation, CI runner): its detected compiler and MPI",
    "gh200-ompi": "the GH200 image userland (Ubuntu 24.04, CSCS images): for images, not for Alps login nodes",
    "gh200-cray": "Alps GH200 nodes with the Cray PE (cray-mpich, /opt/cray): install on an Alps login node",
    "alps-login": "Alps login nodes (SLES 15): Open MPI built by Spack on Cray's /opt/cray libfabric",
    "x86-ompi": "gh200-ompi's x86_64 twin: a Debian 12 workstation or CI runner builds the stack (ci/build-stack.sh)",
    "x86-ompi-cuda13": "x86-ompi with CUDA 13.0.2, whose wheels have nvcc: every package of the stack built on x86_64",
    **{f"images/{n}": f"image {n} only: podman installs its spack.lock from containers/{n}/Containerfile"
       for n in sorted(p.parent.name for p in (TOP / "envs" / "images").glob("*/spack.yaml"))},
}
#: env name -> its directory, relative to the repo root: envs/NAME, the local env's the top
ENVS = {name: Path("envs", name) if name != "local" else Path(".") for name in PURPOSE}
#: envs whose spack.lock is committed: all but local, whose externals are detected per machine, so its lock
#: would only describe the machine that made it. The images install theirs (containers/).
LOCKED = tuple(n for n in ENVS if n != "local")


class OffNodeError(SpackError):
    """A committed lock holds nodes that are not on its env's OS and target (a lock written by plain
    Spack on another host, or edited by hand)."""


class WrongHostError(SpackError):
    """An env is installed on a host that cannot run its node's target (x86_64 for a neoverse_v2 env)."""


class EnvError(SpackError):
    """An env failed to concretize; names the env and the lines of its files that are at fault."""


@dataclass
class Concrete:
    name: str
    copy: Path            # the staged env directory, holding the new spack.lock
    seconds: float        # wall time of the `spack python` processes that concretized it and its batch
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
        if f.name != "develop.yaml":   # ci/build-stack.sh's local source trees: never in a lock
            shutil.copy(f, dest / ".spack" / f.name)
    return dest


def concretize(spack: Spack, name: str, staged: Path, options: tuple[str, ...] = ()) -> Concrete:
    """One env alone, in its own Spack process."""
    return concretize_all(spack, [name], staged, options)[name]


def concretize_all(spack: Spack, names: list[str], staged: Path, options: tuple[str, ...] = (),
                   raise_first: bool = True) -> dict[str, Concrete]:
    """Concretize several envs of one staged copy in Spack processes at once, one per core (options: extra
    `spack -c` settings); each is concrete, or the error that names it. Every process takes the next env no
    other has claimed (docs/environments.md#solver-settings). The host's own Spack configuration (user, system
    and site scopes) is left out: the env's own files say everything."""
    workers = min(os.cpu_count() or 1, len(names))
    outs = {n: staged / env_dir(n) / "concrete.json" for n in names}
    argv = []
    for out in outs.values():
        for stale in (out, *(out.with_name(out.name + s) for s in (".error", ".claim"))):
            stale.unlink(missing_ok=True)
        argv += [str(out.parent), str(out)]
    start = time.perf_counter()

    def run(_):
        return spack(*options, "python", str(SCRIPTS / "concretize.py"), *argv, check=False,
                     timeout=1800 * len(names), extra_env={"SPACK_DISABLE_LOCAL_CONFIG": "1"})

    with ThreadPoolExecutor(max_workers=workers) as pool:
        procs = list(pool.map(run, range(workers)))
    seconds = time.perf_counter() - start
    done: dict[str, Concrete | EnvError] = {}
    for name, out in outs.items():
        error = out.with_name(out.name + ".error")
        if out.exists() and not error.exists():
            data = json.loads(out.read_text())
            done[name] = Concrete(name, out.parent, seconds, data["seconds"], data["roots"], data["nodes"])
            continue
        failed = [p for p in procs if p.returncode != 0]
        why = error.read_text() if error.exists() else "\n".join(p.stderr for p in failed)  # else: a process died
        done[name] = EnvError(f"env {name}: concretization failed (exit {failed[0].returncode if failed else 0})\n"
                              + explain(why, staged, env_dir(name)))
    errors = [r for r in done.values() if isinstance(r, EnvError)]
    if errors and raise_first:
        raise errors[0]
    return done


def explain(stderr: str, root: Path, env: Path) -> str:
    """Our own requirement's message alone when Spack's reasons hold one (Spack lists every error of the
    solver's model after it: docs/environments.md#errors); else Spack's error lines, plus each line of the
    env's files that names what the error quotes."""
    files = [root / env / "spack.yaml", *sorted((root / "envs" / "common").glob("*.yaml"))]
    named = own_reasons(stderr, files)
    if named:
        return "\n".join(named)
    errors = [line for line in stderr.splitlines() if line.strip() and "Warning" not in line][-12:]
    quoted = set(re.findall(r"['\"`]([\w.@+~=:%^-]+)['\"`]", "\n".join(errors)))
    words = {w for q in quoted for w in (q, q.split("@")[0].split("+")[0]) if len(w) > 2}
    culprits = []
    for f in files:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if any(re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", code) for w in words):
                culprits.append(f"  {f.relative_to(root)}:{i}: {line.strip()}")
    return "\n".join(errors + (["offending lines:", *culprits] if culprits else []))


def own_reasons(stderr: str, files: list[Path]) -> list[str]:
    """The numbered reasons of Spack's "failed to concretize" that are a `message:` of our env files, each once."""
    def messages(node) -> list[str]:
        if isinstance(node, dict):
            here = [" ".join(node["message"].split())] if isinstance(node.get("message"), str) else []
            return here + [m for v in node.values() for m in messages(v)]
        return [m for v in node for m in messages(v)] if isinstance(node, list) else []
    ours = {m for f in files if f.is_file() for m in messages(yaml.safe_load(f.read_text()))}
    reasons = [" ".join(r.split()) for r in re.findall(r"^ +\d+\. (.*)$", stderr, re.M)]
    # the message alone: Spack appends its own advice to the last reason (`concretizer:unify`, which is not ours)
    return list(dict.fromkeys(m for r in reasons for m in sorted(ours) if r.startswith(m)))


# ---- locks -------------------------------------------------------------------------------------

def lock_nodes(lock: Path) -> dict[str, dict]:
    """A spack.lock's concrete specs by name: what a drift is about (version, variants, arch,
    external prefix, dependencies by name), and the hash to point at the spec."""
    data = json.loads(lock.read_text())
    specs = data["concrete_specs"]
    nodes = {}
    for h, spec in specs.items():
        arch = spec.get("arch", {})
        target = arch.get("target")
        node = {"hash": h[:7], "version": str(spec.get("version")),
                "arch": f"{arch.get('platform_os')}-{target['name'] if isinstance(target, dict) else target}",
                "variants": {k: v for k, v in spec.get("parameters", {}).items()
                             if k not in ("cflags", "cxxflags", "fflags", "cppflags", "ldflags", "ldlibs")},
                "external": (spec.get("external") or {}).get("path"),
                "deps": sorted(specs[d["hash"]]["name"] for d in spec.get("dependencies", []))}
        if spec["name"] in nodes:  # the stack allows one node per package (duplicates: none)
            raise ConfigError(f"{lock}: two {spec['name']} nodes; one per package expected")
        nodes[spec["name"]] = node
    return nodes


def node_arch(name: str) -> tuple[str, str]:
    """The (os, target) of an env's node, from the `node:` definition of the files it includes
    (`arch=linux-<os>-<target>`, envs/common/ompi.yaml or alps.yaml): the roots' arch, which every
    node must share."""
    env = TOP / env_dir(name)
    found = set()
    for inc in yaml.safe_load((env / "spack.yaml").read_text())["spack"].get("include", []):
        path = env / (inc["path"] if isinstance(inc, dict) else inc)
        if not path.is_file():
            continue
        for d in (yaml.safe_load(path.read_text()) or {}).get("definitions", []):
            for spec in d.get("node", []):
                m = re.fullmatch(r"arch=linux-([a-z]+[\d.]*)-(\w+)", spec)
                if not m:
                    raise ConfigError(f"{path}: node: {spec!r} is not arch=linux-<os>-<target>")
                found.add(m.groups())
    if len(found) != 1:
        raise ConfigError(f"env {name}: {len(found)} node definitions in its includes, one expected")
    return found.pop()


def off_node(name: str, lock: Path | None = None) -> list[str]:
    """Nodes of an env's lock (default: the committed one) whose OS or target is not the env's node:
    one line each, naming the env, the node and its arch."""
    lock = lock or TOP / env_dir(name) / "spack.lock"
    want = "-".join(node_arch(name))
    return [f"env {name}: {pkg} ({n['hash']}) is {n['arch']}, not the node's {want}"
            for pkg, n in sorted(lock_nodes(lock).items()) if n["arch"] != want]


def check_nodes(names: list[str] | None = None) -> None:
    """Every committed lock on its node's OS and target, or OffNodeError naming each node that is not."""
    bad = [line for name in names or LOCKED for line in off_node(name)]
    if bad:
        raise OffNodeError(f"{len(bad)} node(s) off their env's OS and target (plain Spack on another host writes "
                           "these; `bin/commstack lock` writes the node's lock):\n  " + "\n  ".join(bad))


def check_host(spack: Spack, name: str) -> str:
    """Before `spack install`: this host runs code for the env's node target, or WrongHostError
    naming both. Plain `spack install` has no such check (Spack 1.1 installs the first packages
    and fails later, at a fetch or a compile). Returns the host's target."""
    if env_dir(name) == Path("."):
        return "this machine"  # local: built for whatever machine it is on
    os_name, target = node_arch(name)
    code = ("import spack.vendor.archspec.cpu as c; h = c.host(); "
            f"print(h.name, h.family.name, c.TARGETS[{target!r}] <= h)")
    host, family, runs = spack("python", "-c", code, timeout=300).stdout.split()[-3:]
    if runs != "True":
        raise WrongHostError(f"env {name} is built for {target} ({os_name}) nodes; this host is {host} "
                             f"({family}), which cannot run it: install it on the node "
                             f"({PURPOSE.get(name, name)})")
    return host


def lock_diff(old: Path, new: Path, hashes: bool = False) -> list[str]:
    """What moved between two locks, one line per spec: version, variants, arch, external prefix,
    dependencies; hashes alone (a recipe's text, a resolved commit) are not drift, unless `hashes`
    (`lock --check`: a lock edited by hand, or written by another Spack)."""
    a, b = lock_nodes(old), lock_nodes(new)
    lines = []
    for name in sorted(set(a) | set(b)):
        if name not in b:
            lines.append(f"- {name}: removed ({a[name]['version']})")
            continue
        if name not in a:
            lines.append(f"+ {name}: added ({b[name]['version']})")
            continue
        x, y = a[name], b[name]
        what = [f"{k} {x[k]} -> {y[k]}" for k in ("version", "arch", "external") if x[k] != y[k]]
        for k in sorted(set(x["variants"]) | set(y["variants"])):
            if x["variants"].get(k) != y["variants"].get(k):
                what.append(f"{k}={x['variants'].get(k)} -> {y['variants'].get(k)}")
        gone, new_deps = sorted(set(x["deps"]) - set(y["deps"])), sorted(set(y["deps"]) - set(x["deps"]))
        what += [f"depends on {d} no more" for d in gone] + [f"now depends on {d}" for d in new_deps]
        if what:
            lines.append(f"~ {name}: " + ", ".join(what) + f" (hash {x['hash']} -> {y['hash']})")
        elif hashes and x["hash"] != y["hash"]:
            lines.append(f"~ {name}: hash {x['hash']} -> {y['hash']} alone")
    return lines


def lock(spack: Spack, names: list[str] | None = None, check: bool = False) -> int:
    """`bin/commstack lock [ENV...]` and `lock --check` (`check`: nothing is written, a stale lock is exit 1), as
    docs/environments.md#locks says."""
    names = names or list(LOCKED)
    for name in names:
        if name not in LOCKED:
            env_dir(name)  # unknown names fail here, by name
            raise ConfigError(f"env {name} has no committed lock (its externals are this machine's)")
        committed = TOP / env_dir(name) / "spack.lock"
        if check and committed.exists():  # a lock edited by hand may not even be JSON: say so before solving
            try:
                json.loads(committed.read_text())
            except ValueError as e:
                raise ConfigError(f"env {name}: {committed.relative_to(TOP)} is not a Spack lock: {e}") from None
    with tempfile.TemporaryDirectory(prefix="commstack-lock-") as tmp:
        done = concretize_all(spack, names, stage(Path(tmp)),
                              options=("-c", "concretizer:concretization_cache:enable:false"))
        stale: list[str] = []
        for name, c in done.items():
            wrong = root_mismatches(spack, c.copy)
            if wrong:
                raise EnvError(f"env {name}: roots paired with the wrong specs:\n  " + "\n  ".join(wrong))
        for name, c in done.items():
            target = TOP / env_dir(name) / "spack.lock"
            if target.exists() and same_lock(target, c.lock):
                print(f"lock{' --check' if check else ''} {name}: {len(c.nodes)} nodes, "
                      f"solved in {c.solve_seconds:.1f} s; "
                      + ("the committed lock is what its configuration gives" if check else "unchanged (file kept)"))
                continue
            if check:
                stale.append(name)
                moved = check_lines(target, c.lock) if target.exists() else ["no committed lock"]
                print(f"lock --check {name}: {target.relative_to(TOP)} is not what its configuration gives "
                      f"({len(moved)} changes, committed -> now):\n  " + "\n  ".join(moved))
                continue
            diff = lock_diff(target, c.lock) if target.exists() else ["+ new lock"]
            write_atomic(target, c.lock.read_text())
            print(f"lock {name}: {len(c.nodes)} nodes, solved in {c.solve_seconds:.1f} s; "
                  + (f"{len(diff)} changes:\n  " + "\n  ".join(diff) if diff else "same specs, new hashes"))
    if stale:
        print(f"lock --check: {len(stale)} of {len(names)} locks stale: {', '.join(stale)} "
              f"(bin/commstack lock {' '.join(stale)} rewrites them)")
    return exits.FAILED if stale else exits.PASS


def check_lines(committed: Path, now: Path) -> list[str]:
    """`lock --check`: every node that moved, its hash included, and a lockfile format of another Spack."""
    formats = [json.loads(p.read_text()).get("_meta", {}).get("lockfile-version") for p in (committed, now)]
    moved = lock_diff(committed, now, hashes=True)
    return ([f"lockfile-version {formats[0]} -> {formats[1]} (written by another Spack)"]
            if formats[0] != formats[1] else []) + (moved or ["roots paired with other hashes"])


def same_lock(a: Path, b: Path) -> bool:
    """The same roots paired with the same hashes, and the same concrete specs: Spack 1.1 orders the
    roots from a set, so two locks of one solve may differ in order only, and then the old file stays."""
    def key(path: Path) -> tuple:
        data = json.loads(path.read_text())
        return sorted((r["spec"], r["hash"]) for r in data["roots"]), data["concrete_specs"]
    return key(a) == key(b)


def root_mismatches(spack: Spack, env: Path) -> list[str]:
    """Roots of the env's spack.lock whose spec is not the package, version and variants they ask for."""
    roots = spack.run_script("env_view", env_dir=env, extra_env={"SPACK_DISABLE_LOCAL_CONFIG": "1"})["roots"]
    return [f"{r['root']} -> {r['spec']} ({r['hash'][:7]})" for r in roots if not r["ok"]]
