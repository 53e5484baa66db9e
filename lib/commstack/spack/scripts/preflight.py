"""Runs in `spack -e <env> python preflight.py OUT.json OWN`: each external the env uses (its concrete
DAG when locked, else every external its config declares), whether its prefix or modules exist,
and the versions Spack's own detection finds at the prefix (`detected`; None where not asked:
a missing prefix, or a package of OWN, comma-separated, whose version commstack reads itself)."""
import glob, json, os, shutil, sys
import spack.config, spack.detection, spack.environment as ev, spack.spec
from spack.util.module_cmd import module
own = set(sys.argv[2].split(","))
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
         "modules": s.external_modules or [], "problems": [], "found": None, "note": None, "detected": None}
    if s.external_path and not os.path.isdir(s.external_path):
        r["problems"].append(f"prefix {s.external_path} does not exist")
    for m in r["modules"]:
        if not has_module_cmd:
            r["problems"].append(f"module {m}: no module command here to check it")
        elif not module("show", m).strip():
            r["problems"].append(f"module {m} not found")
    if s.external_path and not r["problems"] and s.name not in own:
        try:
            # Spack looks in PREFIX, lib and lib64; Debian's libraries are in lib/<multiarch>
            hints = [s.external_path, *glob.glob(os.path.join(s.external_path, "lib", "*-linux-gnu"))]
            found = spack.detection.by_path([s.name], path_hints=hints).get(s.name, [])
        except Exception as e:
            found, r["note"] = [], f"Spack's detection of {s.name} at {s.external_path} failed: {e}"
        r["detected"] = sorted({str(getattr(f, "spec", f).versions) for f in found})
    out.append(r)
json.dump(sorted(out, key=lambda r: r["name"]), open(sys.argv[1], "w"))
