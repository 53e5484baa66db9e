"""Runs in `spack python versions.py OUT.json`: the versions each recipe of repo/ declares itself
(not those it inherits from builtin), and what pins each: sha256, commit, or nothing."""
import json
import sys

import spack.repo

out = {}
for name in spack.repo.PATH.get_repo("commstack").all_package_names():
    cls = spack.repo.PATH.get_pkg_class(f"commstack.{name}")
    parents = [b for b in cls.__mro__[1:] if getattr(b, "namespace", None) == "builtin"]
    inherited = set(parents[0].versions) if parents else set()
    out[name] = {str(v): sorted(k for k in ("sha256", "commit") if args.get(k))
                 for v, args in cls.versions.items() if v not in inherited}
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
