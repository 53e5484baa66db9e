"""Issue 22, the input half, through a real Slurm: a job script holding shell metacharacters submitted with
sbatch, a damaged history under `bin/commstack run`, and a results directory of another user given to
`run`. The inputs that need no Slurm are in tests/hostile/test_hostile_inputs_without_slurm.py. Each test names
the defect it guards."""

import contextlib
import json
import os
import pwd
import re
import shlex
from pathlib import Path

import pytest

from commstack.files import UnsafePathError
from test_cli import Cli, no_job_left, stopped

pytestmark = [pytest.mark.faults, pytest.mark.slurm]
TOP = Path(__file__).resolve().parents[2]
PAYLOAD = "$(touch {m}) `touch {m}`; touch {m} && touch {m} | touch {m} '\"\\"


@pytest.fixture
def cli(tmp_path):
    c = Cli(tmp_path / "slurm")
    yield c
    with contextlib.suppress(UnsafePathError):
        c.cluster.stop(force=True)


def test_a_job_script_with_shell_metacharacters_runs_none_of_them_under_sbatch(cli, tmp_path, pingpong):
    """issue 22 item 1: what reached job.sh from the system file ran as root under sbatch. A variable and an
    srun flag holding `$(...)`, backticks, `;`, `&&` and quotes reach the job as literal words: the step
    passes, nothing of them runs, and no job is left."""
    marker = tmp_path / "pwned"
    payload = PAYLOAD.format(m=marker)
    local = (TOP / "systems" / "local.yaml").read_text()
    assert "srun_flags: [--overcommit]" in local
    system = tmp_path / "local.yaml"
    system.write_text(local.replace("srun_flags: [--overcommit]",
                                    f"srun_flags: [--overcommit, {json.dumps('--comment=' + payload)}]")
                      + f"variables: {{X_1: {json.dumps(payload)}}}\n")
    suite = tmp_path / "meta.yaml"
    suite.write_text("name: meta.suite_1\nsteps:\n- {id: a.b_c-1, benchmark: mpi-pingpong, mode: cpu, "
                     "ranks_per_node: 2, sizes: [8, 64], args: [-n, 10]}\n")
    results = tmp_path / "r"
    proc = cli.run("suite", str(suite), "--system", str(system), "--submit", "--wait", "--pingpong", str(pingpong),
                   "--results", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "  pass         meta.suite_1/a.b_c-1-cpu-N1-n2-host-native" in proc.stdout
    assert not marker.exists(), "an input ran as a command"
    script = (results / "batch" / "job.sh").read_text()
    # set by `env` for the benchmark alone, not exported to srun (issue 32 item 5)
    assert f" env {shlex.quote('X_1=' + payload)} " in script and "\nexport " not in script
    no_job_left(cli.cluster)


def test_a_damaged_history_is_named_after_the_verdicts_of_a_run(cli, tmp_path, pingpong):
    """issue 22 item 10: a damaged COMMSTACK_HISTORY failed `run` after its steps passed, with a traceback,
    exit 1, and no junit or timings. The verdicts are printed, every file of the run is written, the
    history is named last, exit 2, and nothing is left running."""
    history = tmp_path / "history.sqlite"
    history.write_bytes(b"not an SQLite file\n" * 512)
    results = tmp_path / "r"
    proc = cli.run("run", *cli.no_build, "--pingpong", str(pingpong), "--results", str(results),
                   env={"COMMSTACK_HISTORY": str(history)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert re.search(r"^pass {9}mpi-pingpong-cpu-N1-n2-host-native  mpi-pingpong 1 MiB: ", proc.stdout, re.M)
    assert proc.stdout.rstrip().splitlines()[-1] == "exit 2: bad input, named below", proc.stdout
    assert proc.stderr.rstrip().splitlines()[-1] == (
        f"commstack run: error: history not updated: {history}: not a commstack history, or damaged (file is not a "
        "database)")
    assert {"junit.xml", "timings.json", "report", "plan.json", "steps"} <= set(os.listdir(results))
    assert history.read_bytes() == b"not an SQLite file\n" * 512
    stopped(cli.cluster)


def test_run_refuses_results_of_another_user_before_slurm_starts(cli, tmp_path):
    """issue 22 item 3: `run --results` in an empty directory of another user was accepted, and that user
    could plant a symlink for root to write through. Refused, exit 2, before the cluster starts."""
    nobody = pwd.getpwnam("nobody").pw_uid
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, nobody, -1)
    proc = cli.run("run", *cli.no_build, "--results", str(theirs))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"commstack run: error: results directory {theirs} belongs to uid {nobody}" in proc.stderr
    assert os.listdir(theirs) == [] and cli.cluster.pid("slurmctld") is None
