"""Runs in `spack python concretize.py ENV_DIR OUT.json [ENV_DIR OUT.json ...]` (envs.concretize_all: processes
share one list): concretize each env as on its node, write its spack.lock, and dump every node for the checks. An env
that declares its node's glibc is solved with this host described as that node (as_node): the one use of Spack
internals left, for what Spack has no public way to say (docs/environments.md#cross-concretization-traps, #locks).
"""
import contextlib
import json
import os
import re
import sys
import time
from unittest import mock

import spack.compilers.libraries
import spack.config
import spack.environment as ev
import spack.platforms
import spack.repo
import spack.solver.asp
import spack.solver.runtimes
import spack.spec
from spack.operating_systems import OperatingSystem


class Refused(Exception):
    pass


def check_names(packages):
    """A package config for a name Spack does not know is ignored by Spack: the pin would silently
    not hold. Every name under packages: must be a package or a virtual of the env's repositories."""
    unknown = sorted(n for n in packages if n != "all" and not spack.repo.PATH.exists(n)
                     and not spack.repo.PATH.is_virtual(n))
    if unknown:
        raise Refused(f"packages config names unknown package(s): {', '.join(repr(n) for n in unknown)} "
                      "(a typo? Spack ignores them)")


@contextlib.contextmanager
def as_node(packages):
    """The env's node as the host: its OS the only one, its declared glibc the compilers' libc."""
    externals = (packages.get("glibc") or {}).get("externals", [])
    if not externals:
        yield
        return
    specs = [spack.spec.Spec(e["spec"]) for e in externals]
    if len({str(s.architecture.os) for s in specs}) != 1:
        raise Refused("the glibc externals name more than one OS: one node OS per env")
    node_os = str(specs[0].architecture.os)
    libc = spack.spec.Spec(f"glibc@={specs[0].versions}")
    libc.external_path = externals[0].get("prefix", "/usr")
    name, version = re.fullmatch(r"([a-z]+)([\d.]*)", node_os).groups()
    platform = spack.platforms.Linux()
    platform.operating_sys = {node_os: OperatingSystem(name, version)}
    platform.default_os = node_os
    detector = spack.compilers.libraries.CompilerPropertyDetector
    with spack.platforms.use_platform(platform), \
            mock.patch.object(detector, "default_libc", lambda self: libc.copy()), \
            mock.patch.object(spack.solver.asp, "c_compiler_runs", lambda compiler: True), \
            mock.patch.object(spack.solver.asp, "all_libcs", lambda: {libc}), \
            mock.patch.object(spack.solver.runtimes, "all_libcs", lambda: {libc}):
        yield


def variants(spec):
    return {k: v.value if isinstance(v.value, bool) else
            (sorted(str(x) for x in v.value) if isinstance(v.value, tuple) else str(v.value))
            for k, v in spec.variants.items()}


def concretize(path, out):
    with ev.Environment(path) as env:
        packages = spack.config.get("packages")
        check_names(packages)
        with as_node(packages):
            start = time.perf_counter()
            env.concretize(force=True)
            seconds = time.perf_counter() - start
            env.write(regenerate=False)
        nodes = [{"name": spec.name, "version": str(spec.version), "namespace": spec.namespace,
                  "target": str(spec.target), "os": str(spec.os), "external": spec.external,
                  "prefix": spec.external_path if spec.external else None, "hash": spec.dag_hash(),
                  "variants": variants(spec), "deps": sorted({d.name for d in spec.dependencies()})}
                 for spec in env.all_specs()]  # one per DAG hash (Spack traverses by_dag_hash)
        roots = [s.name for s in env.concrete_roots()]
    with open(out, "w") as f:
        json.dump({"seconds": seconds, "roots": roots, "nodes": nodes}, f)


def claim(out):
    try:
        os.close(os.open(out + ".claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:  # another process has it
        return False


# The host's own Spack configuration ($spack/etc/spack and the site scope it includes; the caller
# already turns off the user and system scopes) is no input: a site's detected compilers and tools
# would otherwise be taken as externals of the node's stack, and the lock would be the host's.
spack.config.CONFIG.remove_scope("spack")

failed = 0
for path, out in zip(sys.argv[1::2], sys.argv[2::2]):
    if not claim(out):
        continue
    try:
        concretize(path, out)
    except Exception as e:  # one env failing does not hide the others; the caller names it
        failed += 1
        with open(out + ".error", "w") as f:
            f.write(f"==> Error: {e}\n{getattr(e, 'long_message', None) or ''}\n")
        print(f"==> Error: {path}: {e}", file=sys.stderr)
sys.exit(3 if failed else 0)
