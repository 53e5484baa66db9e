"""Issue 22 items 8 and 12 where no Slurm is needed: long lines cut in what `commstack parse` shows, and
loader variables on the benchmark's command line alone (`suite --dry-run`)."""

import subprocess
import sys
from pathlib import Path

from commstack import exits

TOP = Path(__file__).resolve().parents[2]


def commstack(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "commstack", *args], capture_output=True, text=True, timeout=120,
                          cwd=TOP)


def test_parse_cuts_a_long_line_it_quotes(tmp_path):
    """issue 22 item 8: an 8 MB line was copied whole wherever it was quoted."""
    out = tmp_path / "stdout.txt"
    out.write_text("y" * 8_000_000 + "\n")
    proc = commstack("parse", "--strict", str(out))  # a step's rule quotes the line that breaks it
    assert proc.returncode == exits.UNKNOWN_FORMAT, proc.stderr
    assert "y" * 200 + "... (7999800 more characters)" in proc.stderr and len(proc.stderr) < 2000


def test_loader_variables_are_set_for_the_benchmark_alone(tmp_path):
    """issue 22 item 12, issue 32 item 5: LD_PRELOAD of a system went into srun's own environment; now `env`
    sets it and every other variable of the system for the benchmark, after srun's `--`, on the line --dry-run
    prints; the probe gets LD_LIBRARY_PATH alone in its environment, the others as its arguments."""
    system = tmp_path / "preload.yaml"
    system.write_text((TOP / "systems" / "local.yaml").read_text().replace("name: local", "name: local-preload")
                      + "variables:\n  LD_PRELOAD: /opt/lib/hook.so\n  LD_LIBRARY_PATH: /opt/lib\n  FI_PROVIDER: tcp\n")
    proc = commstack("suite", "smoke", "--system", str(system), "--pingpong", "/bin/true", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("srun") and "/bin/true" in line)
    assert " --overcommit -- " in line  # srun's options end; then commstack's reaper (procs.reap), then the variables
    assert " reap -- env LD_PRELOAD=/opt/lib/hook.so LD_LIBRARY_PATH=/opt/lib FI_PROVIDER=tcp /bin/true -m cpu" in line
