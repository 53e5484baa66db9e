"""ci/check-host.py started by a Python without commstack runs itself again on the repository's venv, once: a
venv whose Python cannot import commstack either is a named error, not a loop of `bin/commstack venv` and exec."""

import os
import shutil
import subprocess
import sys

from commstack.paths import TOP


def test_a_venv_that_cannot_import_commstack_is_an_error_after_one_try(tmp_path):
    """The script in a copy of the repository whose bin/commstack counts its calls, and whose .venv is a real
    venv without commstack (as a broken install leaves it)."""
    (tmp_path / "ci").mkdir()
    shutil.copy2(TOP / "ci" / "check-host.py", tmp_path / "ci" / "check-host.py")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "commstack").write_text(f"#!/bin/sh\necho \"$*\" >>{tmp_path / 'calls'}\n")
    (tmp_path / "bin" / "commstack").chmod(0o755)
    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COMMSTACK_VENV")}
    proc = subprocess.run([str(venv / "bin" / "python"), str(tmp_path / "ci" / "check-host.py"), "local"], env=env,
                          capture_output=True, text=True, timeout=120)  # a loop: TimeoutExpired
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == (f"ci/check-host.py: error: {venv / 'bin' / 'python'}, the venv's Python after "
                           "`bin/commstack venv`, cannot import commstack (No module named 'commstack'): remove "
                           f"{venv} and run `bin/commstack venv` again\n")
    assert (tmp_path / "calls").read_text() == "venv\n"   # bin/commstack venv ran once
