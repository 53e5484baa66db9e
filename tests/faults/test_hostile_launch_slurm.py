"""Issue 32 through a real Slurm, as a hostile or unlucky local user meets `bin/commstack run`/`suite`/`slurm
start`: a system's PATH, BASH_ENV and PYTHONPATH (item 5), a fixed COMMSTACK_SLURM_PORT another user holds
(item 7), a daemon that empties its environment (item 15). Each test names its item; each checks the exit
status, what ran, and that nothing of the run is left."""

import pwd
import re
import secrets
import subprocess
from pathlib import Path

import pytest

from commstack.slurm.cluster import LocalSlurm
from test_cli import Cli, records_of, stopped, suite_file
from test_hostile_processes import ONE, ONE_STEP, fake_pingpong, processes_naming

pytestmark = [pytest.mark.faults, pytest.mark.slurm]
TOP = Path(__file__).resolve().parents[2]


@pytest.fixture
def cli(tmp_path):
    c = Cli(tmp_path / "slurm")
    yield c
    c.cluster.stop(force=True)


def evil_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A directory a hostile system file points PATH, BASH_ENV and PYTHONPATH at: each of its programs, when run,
    appends what ran it to the log (an `srun`, a `bash` started with BASH_ENV, a Python started with PYTHONPATH)."""
    evil, log = tmp_path / "evil", tmp_path / "evil.log"
    evil.mkdir()
    for name in ("srun", "bash", "ldd", "fi_info", "hostname", "env"):
        (evil / name).write_text(f"#!/bin/sh\necho \"{name}: $0 $*\" >> {log}\nexit 1\n")
        (evil / name).chmod(0o755)
    (evil / "bash_env").write_text(f'echo "BASH_ENV sourced by $0" >> {log}\n')
    (evil / "sitecustomize.py").write_text(f"import sys\nopen({str(log)!r}, 'a').write(f'PYTHONPATH: {{sys.argv}}"
                                           "\\n')\n")
    return evil, log


def test_variables_of_a_system_reach_the_benchmark_and_nothing_of_ours(cli, tmp_path):
    """issue 32 item 5: `PATH: /x/evilbin:...` in a system's variables made commstack run /x/evilbin/srun as root,
    for the probe and the step, and BASH_ENV was sourced as root by the probe and by `ldd`. Now srun, the probe,
    its ldd, the pair launcher's Python and the reaper run as they would without them, and the benchmark's ranks
    (and fi_pingpong, through the pair launcher) see them."""
    evil, log = evil_dir(tmp_path)
    system = tmp_path / "evil.yaml"
    system.write_text((TOP / "systems" / "local.yaml").read_text().replace("name: local", "name: local-evil")
                      + f"variables:\n  PATH: {evil}:/usr/bin:/bin\n  BASH_ENV: {evil}/bash_env\n"
                        f"  PYTHONPATH: {evil}\n  ENV: {evil}/bash_env\n")
    binary = fake_pingpong(tmp_path, 'echo "rank sees PATH=$PATH BASH_ENV=$BASH_ENV PYTHONPATH=$PYTHONPATH" >&2')
    suite = suite_file(tmp_path, ONE_STEP + "- {benchmark: fi_pingpong, ranks_per_node: 2, args: [-e, rdm, -I, 5]}\n")
    results = tmp_path / "r"
    proc = cli.run("suite", str(suite), "--system", str(system), "--slurm", "local", "--pingpong", str(binary),
                   "--results", str(results))
    records = records_of(results)
    assert records[ONE].verdict == "pass", proc.stdout + proc.stderr
    ran = log.read_text().splitlines() if log.exists() else []
    # the benchmark is a bash script: BASH_ENV is its own to source, and nothing else of the log is allowed
    assert [line for line in ran if line != f"BASH_ENV sourced by {binary}"] == [], ran
    assert f"BASH_ENV sourced by {binary}" in ran
    step = results / "steps" / f"one--{ONE}"
    seen = (step / "repeat-0" / "stderr.txt").read_text()
    assert f"rank sees PATH={evil}:/usr/bin:/bin BASH_ENV={evil}/bash_env PYTHONPATH={evil}" in seen
    # the probe ran with the real fi_info (the planted one logs and prints nothing)
    assert re.search(r"^@@ 0 \S+ fi_selected provider: ", (step / "probe" / "stdout.txt").read_text(), re.M)
    fi = next(r for r in records.values() if r.benchmark == "fi_pingpong")
    assert fi.verdict == "pass", fi.reason  # the tools found by their own path, run with PATH=evil
    stopped(cli.cluster)


def test_a_fixed_port_someone_else_holds_is_named_before_any_daemon_starts(tmp_path):
    """issue 32 item 7: with COMMSTACK_SLURM_PORT on a port another user listened on, slurmd and the clients sent
    ten munge-authenticated messages to that listener, and the run said only "did not come up within 30 s".
    Now `slurm start` says who holds it, and starts nothing."""
    nobody = pwd.getpwnam("nobody")
    squatter = subprocess.Popen(
        ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups", "/usr/bin/python3",
         "-c", "import socket, sys\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n"
               "print(s.getsockname()[1], flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(squatter.stdout.readline())
        c = Cli(tmp_path / "slurm")
        c.env["COMMSTACK_SLURM_PORT"] = str(port)
        proc = c.run("slurm", "start")
        assert proc.returncode != 0, proc.stdout + proc.stderr
        assert f"port {port} is in use by uid {nobody.pw_uid}" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        assert not (tmp_path / "slurm" / "run" / "slurmctld.pid").exists()
        assert LocalSlurm(tmp_path / "slurm").processes() == []
    finally:
        squatter.stdin.close()
        squatter.wait(timeout=30)


@pytest.mark.parametrize("launcher", ["srun", "mpirun"])
def test_a_daemon_that_empties_its_environment_ends_with_its_step(cli, tmp_path, launcher):
    """issue 32 item 15: a daemon started with `env -i` (no mark in its environment) outlived its step, the run
    and the cluster, as root. Each task now runs under commstack's reaper, a child subreaper: the daemon is its
    child once its parent ended, and ends with the task."""
    mark = f"1000.{secrets.randbelow(10**6)}"
    binary = fake_pingpong(tmp_path, f"env -i setsid sleep {mark} &")
    results = tmp_path / "r"
    proc = cli.run("suite", str(suite_file(tmp_path, ONE_STEP)), "--pingpong", str(binary), "--launcher", launcher,
                   "--results", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert records_of(results)[ONE].verdict == "pass"
    assert processes_naming(f"sleep {mark}") == []
    if launcher == "srun":
        stopped(cli.cluster)
