"""What each test tier costs: its tests (pytest's collection, by the tiers' markers) and their time in a run's
JUnit XML (`bin/commstack test` writes results/junit.xml), each test's setup, call and teardown, as pytest
reports it. The README's tier table comes from this script's output.

  .venv/bin/python perf/tier_times.py [results/junit.xml]

A test the XML does not hold (not run, or deselected) counts as a test of its tier, not as time; a skipped one
counts as a test and a skip. The XML of a run beside another (a loaded machine) gives loaded figures: say so
where they are quoted."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
#: the tiers as README.md names them, each by its pytest marker expression
TIERS = {"unit": "not slurm and not faults and not spack and not multinode and not hostile",
         "hostile": "hostile", "slurm, faults": "(slurm or faults) and not multinode and not spack",
         "spack": "spack", "multinode": "multinode and not spack"}


def collected(markers: str) -> set[str]:
    """The node ids of the tests that `-m markers` selects."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", markers], capture_output=True, text=True, cwd=TOP, check=False).stdout
    return {line for line in out.splitlines() if "::" in line}


def junit(path: Path) -> dict[str, tuple[float, bool]]:
    """{node id: (seconds, skipped)} of a JUnit XML that pytest wrote."""
    out = {}
    for case in ET.parse(path).iter("testcase"):
        # pytest writes classname as the dotted file path (with a class, its name last): rebuild the node id
        parts = case.get("classname", "").split(".")
        node = next((f"{'/'.join(parts[:i])}.py::{'::'.join(parts[i:] + [case.get('name')])}"
                     for i in range(len(parts), 0, -1) if (TOP / ("/".join(parts[:i]) + ".py")).is_file()), None)
        if node is not None:
            out[node] = (float(case.get("time", 0)), case.find("skipped") is not None)
    return out


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else TOP / "results" / "junit.xml"
    times = junit(path)
    print(f"{path}: {len(times)} tests")
    print(f"{'tier':<14} {'tests':>6} {'in the XML':>10} {'skipped':>8} {'time':>10}")
    rows = []
    for tier, markers in TIERS.items():
        ids = collected(markers)
        ran = [times[i] for i in ids if i in times]
        rows.append((tier, len(ids), len(ran), sum(s for _, s in ran), sum(t for t, _ in ran)))
    rows.append(("all", *(sum(r[i] for r in rows) for i in range(1, 5))))
    for tier, tests, ran, skipped, seconds in rows:
        print(f"{tier:<14} {tests:>6} {ran:>10} {skipped:>8} {int(seconds // 60):>4} min {seconds % 60:>2.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
