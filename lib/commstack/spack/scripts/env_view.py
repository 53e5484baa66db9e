"""Runs in `spack -e <env> python env_view.py OUT.json`: what the harness needs to run an env's binaries, in
Spack's own terms, no package.py imported (docs/harness.md#running-an-envs-binaries-env); and each root of the lock
with the spec it points to (a lock can pair a root with another package's spec)."""
import json
import os
import sys

import spack.environment as ev
import spack.projections
import spack.vendor.archspec.cpu as cpu


def projected(view, spec) -> str:
    """Where `view` puts `spec`, by its projections as Spack's view does; Spack's own get_projection_for_spec
    imports the spec's package.py (to place an extension by its extendee: none of the benchmarks is one)."""
    projection = spack.projections.get_projection(view.projections or {}, spec)
    return os.path.join(view.root, spec.format_path(projection)) if projection else view.root


env = ev.active_environment()
host = cpu.host()
view = env.views.get("default")
nodes = []
for spec in env.all_specs():
    target = spec.target
    nodes.append({
        "name": spec.name, "version": str(spec.version), "hash": spec.dag_hash(), "prefix": str(spec.prefix),
        "installed": bool(spec.installed), "external": bool(spec.external), "target": target.name,
        "family": target.family.name, "runs_here": target == host or target in host.ancestors,
        # externals are not linked into a view: their binaries stay under their own prefix
        "in_view": None if view is None or spec.external else projected(view, spec),
        # from the lock's edges, not spec.package: reading an env imports none of its package code (issue 48)
        "mpi": any("mpi" in edge.virtuals for edge in spec.edges_from_dependents()),
        "root": any(spec.dag_hash() == r.dag_hash() for r in env.concrete_roots())})
out = {"yaml_roots": sorted(str(s) for s in env.user_specs),
       "lock_roots": sorted(str(s) for s in env.concretized_user_specs),
       "roots": [{"root": str(user), "spec": env.specs_by_hash[h].format("{name}{@version}{variants}"), "hash": h,
                  "ok": env.specs_by_hash[h].satisfies(user)}
                 for user, h in zip(env.concretized_user_specs, env.concretized_order)],
       "view": view.root if view else None,
       "host": {"target": host.name, "family": host.family.name},
       "nodes": nodes}
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
