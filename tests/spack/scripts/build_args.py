"""Runs in `spack -e <env> python build_args.py OUT.json PKG...`: what Spack would pass to configure
and make for each package of the concrete env, and the build environment its dependencies set
(the MPI's included: compiler-wrapper flags such as Cray's GTL come from there)."""
import json
import sys

import spack.builder
import spack.environment as ev
from spack.util.environment import EnvironmentModifications

specs = {s.name: s for s in ev.active_environment().all_specs()}
out = {}
for name in sys.argv[2:]:
    spec = specs[name]
    mods = EnvironmentModifications()
    if "mpi" in spec:  # mpicc & co. are set on the spec by the MPI package, as at build time
        spec["mpi"].package.setup_dependent_package(spec.package.module, spec)
        spec["mpi"].package.setup_dependent_build_environment(mods, spec)
    builder = spack.builder.create(spec.package)
    builder.setup_build_environment(mods)
    out[name] = {"prefix": {d.name: str(d.prefix) for d in spec.traverse()},
                 "env": {m.name: getattr(m, "value", None) for m in mods.env_modifications},
                 "configure": builder.configure_args() if hasattr(builder, "configure_args") else None,
                 "make": list(builder.build_targets) if hasattr(builder, "build_targets") else None}
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
