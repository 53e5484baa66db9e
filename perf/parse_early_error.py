"""`commstack parse` on huge outputs (issue 32, item 9): the time to its verdict and its peak memory.

Each case is an output of about --mb MB (default 60): a title, an error in its first lines, then rows
to the end; and, for scale, outputs whose verdict needs every line. Each runs `bin/commstack parse` as
the child of a fresh Python, which prints the child's peak resident memory (getrusage RUSAGE_CHILDREN: the
kernel's own count over the child's life) and the wall time. Issue 32 asks, for an early error in a 60 MB
output, a verdict within 10 s under 200 MB; exit 1 when an early-error case misses it.

  bin/commstack venv && .venv/bin/python perf/parse_early_error.py [--mb 60] [--commstack bin/commstack]
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
TITLE = ("# OSU MPI Bandwidth Test v7.2\n# Size      Bandwidth (MB/s)\n# Datatype: MPI_CHAR.\n"
         "1                       1.23\n")
ROW = "2                       2.34\n"
# name -> (the text before the rows, the row repeated, whether the verdict may come early)
CASES = {
    "unknown line at line 5": (TITLE + "garbage from the job script\n", ROW, True),
    "crash line at line 5": (TITLE + "srun: error: nid001: task 1: Segmentation fault\n", ROW, True),
    "short rows out of order from line 5": (TITLE, "1 1.0\n", True),
    "no title, 60 MB of job-script echo": ("", "echo from the job script\n", False),
}
MEASURE = """
import resource, subprocess, sys, time
start = time.monotonic()
p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
print(p.returncode, time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
      repr(p.stderr.splitlines()[:1]))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=60, help="size of each output, MB")
    ap.add_argument("--commstack", default=str(TOP / "bin" / "commstack"))
    args = ap.parse_args()
    missed = False
    with tempfile.TemporaryDirectory() as tmp:
        for name, (head, row, early) in CASES.items():
            path = Path(tmp) / "out.txt"
            with open(path, "w") as f:
                f.write(head)
                f.write(row * (args.mb * 10 ** 6 // len(row)))
            out = subprocess.run([sys.executable, "-c", MEASURE, args.commstack, "parse", str(path)],
                                 capture_output=True, text=True, timeout=3600).stdout.split(maxsplit=3)
            status, seconds, peak, first = int(out[0]), float(out[1]), int(out[2]), out[3].strip()
            ok = not early or (seconds < 10 and peak < 200 * 2 ** 20)
            missed |= not ok
            print(json.dumps({"case": name, "MB": round(path.stat().st_size / 1e6, 1), "exit": status,
                              "seconds": round(seconds, 2), "peak_MB": round(peak / 2 ** 20, 1),
                              "stderr": first, "within_issue_32": ok if early else "n/a (needs every line)"}))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
