"""Runs in `spack -e <env> python preflight.py OUT.json`: each external the env uses (its concrete
DAG when locked, else every external its config declares), whether its prefix or modules exist,
and the version Spack's own detection finds at the prefix."""
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
