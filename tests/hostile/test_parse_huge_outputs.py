"""Issue 32, item 9: `commstack parse` stops at the first line that settles the verdict. An output with an
error in its first lines and 60 MB after it is refused with a peak memory that does not grow with the
output (the child's own peak, from the kernel: getrusage RUSAGE_CHILDREN in a fresh Python that runs
`bin/commstack parse` and nothing else). Times and figures: perf/parse_early_error.py; the only clock
here is a generous subprocess timeout."""

import subprocess
import sys

import pytest

from commstack import exits
from commstack.paths import TOP

pytestmark = pytest.mark.hostile

TITLE = ("# OSU MPI Bandwidth Test v7.2\n# Size      Bandwidth (MB/s)\n# Datatype: MPI_CHAR.\n"
         "1                       1.23\n")
MB = 60
PEAK_LIMIT = 200 * 2 ** 20
MEASURE = """
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
print(p.stderr)
"""


def parse_measured(path) -> tuple[int, int, str]:
    """(exit status, peak resident bytes, stderr) of `bin/commstack parse PATH`."""
    p = subprocess.run([sys.executable, "-c", MEASURE, str(TOP / "bin" / "commstack"), "parse", str(path)],
                       capture_output=True, text=True, timeout=300)
    head, _, stderr = p.stdout.partition("\n")
    status, peak = head.split()
    return int(status), int(peak), stderr


@pytest.mark.parametrize("error, row, kind, exit_code", [
    ("garbage from the job script\n", "2                       2.34\n", "unknown-format", exits.UNKNOWN_FORMAT),
    ("srun: error: nid001: task 1: Segmentation fault\n", "2                       2.34\n", "crashed", exits.CRASHED),
    ("", "1 1.0\n", "unknown-format", exits.UNKNOWN_FORMAT),  # 63 MB of short rows, out of order from the second
])
def test_an_early_error_in_60_mb_is_refused_in_flat_memory(tmp_path, error, row, kind, exit_code):
    path = tmp_path / "out.txt"
    with open(path, "w") as f:
        f.write(TITLE + error)
        f.write(row * (MB * 10 ** 6 // len(row)))
    status, peak, stderr = parse_measured(path)
    assert status == exit_code and f": {kind}: " in stderr, stderr
    assert "the failure above settles the verdict" in stderr
    assert peak < PEAK_LIMIT, f"peak {peak / 2 ** 20:.0f} MB"


def test_no_title_in_a_huge_job_log_is_refused_in_bounded_memory(tmp_path):
    """60 MB of a job script's echo and no benchmark title: unknown-format once settle.TITLE_WITHIN lines are
    read, not after every line."""
    path = tmp_path / "out.txt"
    path.write_text("echo from the job script\n" * (MB * 10 ** 6 // 25))
    status, peak, stderr = parse_measured(path)
    assert status == exits.UNKNOWN_FORMAT and "no benchmark title" in stderr and "read 131072 lines" in stderr, stderr
    assert peak < PEAK_LIMIT, f"peak {peak / 2 ** 20:.0f} MB"


def test_a_complete_output_is_still_read_to_its_end(tmp_path):
    """The early stop never cuts a good output: a valid table after 20,000 lines of known noise (more than
    the first part read) is complete."""
    noise = "srun: job 4123 queued and waiting for resources\n" * 20000
    rows = "".join(f"{1 << i:<24d}{1.0 + i:.2f}\n" for i in range(23))
    path = tmp_path / "out.txt"
    path.write_text(noise + TITLE.replace("1                       1.23\n", "") + rows)
    p = subprocess.run([str(TOP / "bin" / "commstack"), "parse", str(path)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and "23 rows, 1..4194304 B, complete" in p.stdout, p.stderr
