"""Runs in `spack -e <env> python roots.py OUT.json`: every root of the env's spack.lock with the
concrete spec its hash points to, and whether that spec is the package, version and variants the
root asks for (a lock can pair a root with another package's spec)."""
import json
import sys

import spack.environment as ev

env = ev.active_environment()
out = []
for user, h in zip(env.concretized_user_specs, env.concretized_order):
    concrete = env.specs_by_hash[h]
    out.append({"root": str(user), "spec": concrete.format("{name}{@version}{variants}"),
                "hash": h, "ok": concrete.satisfies(user)})
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
