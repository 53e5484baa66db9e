"""Each built package of an installed env: Spack's own wall time per phase, the total, and the size of the
install tree. Read from `<prefix>/.spack/install_times.json`, which `spack install` writes.

  spack -e envs/x86-ompi python perf/build_times.py

Prints one line per built package (externals have no build), then the sum of the totals and `du` of
every prefix. The recorded run is tests/data/stack/build-times.txt (docs/building.md).
"""

import json
import os

import spack.environment as ev


def size(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.lstat(p).st_size
    return total


env = ev.active_environment()
if env is None:
    raise SystemExit("perf/build_times.py: run it as `spack -e ENV python perf/build_times.py`")
rows, missing = [], []
for spec in sorted({s for s in env.all_specs() if not s.external}, key=lambda s: s.name):
    record = os.path.join(spec.prefix, ".spack", "install_times.json")
    if not os.path.exists(record):
        missing.append(spec.name)
        continue
    with open(record) as f:
        times = json.load(f)
    phases = ", ".join(f"{p['name']} {p['seconds']:.0f}" for p in times["phases"] if p["seconds"] >= 1)
    rows.append((spec.name, str(spec.version), times["total"], size(spec.prefix), phases))
print(f"{'package':<22} {'version':<10} {'wall s':>8} {'MiB':>7}  phases (s)")
for name, version, total, nbytes, phases in rows:
    print(f"{name:<22} {version:<10} {total:>8.0f} {nbytes / 2**20:>7.1f}  {phases}")
print(f"{'total':<22} {'':<10} {sum(r[2] for r in rows):>8.0f} {sum(r[3] for r in rows) / 2**20:>7.1f}  "
      f"{len(rows)} packages built")
if missing:
    print(f"not installed: {', '.join(missing)}")
