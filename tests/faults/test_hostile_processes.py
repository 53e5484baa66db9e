"""Issue 22, the processes of a run, met through `bin/commstack run`/`suite` as a hostile or unlucky user
would: the signals that end a run, a benchmark that leaves a daemon, output without end, a local user on
the embedded cluster's old fixed ports, a user without root, LD_PRELOAD in a system. Each test names the
defect it guards; each checks the exit status, the records, and that nothing of the run is left."""

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
from waits import wait_until

from commstack.results.records import read_run
from commstack.slurm.cluster import LocalSlurm
from test_cli import AFTER_STEP, LONG, LONG_STEP, SMOKE_EXIT, THREE, Cli, no_job_left, records_of, stopped, \
    suite_file, wait_for_pingpong

pytestmark = [pytest.mark.faults, pytest.mark.slurm]
TOP = Path(__file__).resolve().parents[2]
ROW = ("Transfer size (B):          8, Transfer Time (s):     0.000000524, Bandwidth (GB/s):     0.014231566, "
       "Check: Pass")
ONE_STEP = """name: one
description: one step of mpi-pingpong's size 8, with a 60 s limit (a loaded machine starts it slowly)
steps:
- {id: one, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 8], timeout_s: 60}
"""
ONE = "one-cpu-N1-n2-host-native"


@pytest.fixture
def cli(tmp_path):
    c = Cli(tmp_path / "slurm")
    yield c
    c.cluster.stop(force=True)


def fake_pingpong(tmp_path: Path, before: str = "", table: bool = True) -> Path:
    """A binary passed as --pingpong: runs `before` (shell), then rank 0 prints a valid table of size 8."""
    path = tmp_path / "fake-pingpong"
    body = (f'if [ "$RANK" = 0 ]; then\n'
            f'  echo "# mpi-pingpong v1.0 mode=cpu ranks=2 loops=10 warmup=5 min=8 max=8"\n'
            f'  echo "{ROW}"\n  echo "# mpi-pingpong done: all sizes passed"\nfi\n') if table else ""
    path.write_text(f"#!/bin/bash\nRANK=${{SLURM_PROCID:-${{OMPI_COMM_WORLD_RANK:-0}}}}\n{before}\n{body}exit 0\n")
    path.chmod(0o755)
    return path


def processes_naming(text: str) -> list[str]:
    """Command lines of the processes that name `text`, but this test's own."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT], ids=lambda s: s.name)
def test_every_terminating_signal_cleans_up_like_ctrl_c(cli, tmp_path, sig):
    """issue 22 item 6: SIGTERM (timeout, a batch time limit), SIGHUP (a closed terminal) and SIGQUIT left
    srun, the ranks and the allocation running, and lost the output, the report and junit. Now: the clean-up
    of Ctrl-C, exit 128+N, and 5 s later no srun, no benchmark process and no job of ours."""
    results = tmp_path / "r"
    proc = cli.start("suite", str(suite_file(tmp_path, LONG)), "--results", str(results))
    out = results / "steps" / f"long--{LONG_STEP}" / "repeat-0"
    wait_for_pingpong(proc, cli.cluster, out)
    os.kill(proc.pid, sig)  # to commstack alone, as `timeout` does
    text, err = proc.communicate(timeout=180)
    assert proc.returncode == 128 + sig, text + err
    assert f"interrupted by {sig.name}: cleaning up, please wait (further signals are ignored until done)" in text
    assert f"commstack suite: interrupted; partial results and report in {results}" in err
    assert "Traceback" not in text + err
    records = records_of(results)
    assert records[LONG_STEP].reason == f"interrupted ({sig.name}); its output so far is kept"
    assert records[LONG_STEP].outputs == [str(out.relative_to(results))]
    assert "# mpi-pingpong v" in (out / "stdout.txt").read_text()
    assert records[AFTER_STEP].reason == f"interrupted ({sig.name}) before this step"
    assert "2 steps: 2 not-run" in (results / "report" / "index.html").read_text()
    assert '<testsuite name="pytest"' in (results / "junit.xml").read_text()  # pytest's, for an interrupted session
    wait_until(lambda: processes_naming(str(results)) == [], "no srun, no mpi-pingpong of this run left")
    stopped(cli.cluster)  # no job: the cluster, used by this run alone, is down, and no process of it left


@pytest.mark.parametrize("daemon", ["setsid sleep {} &", "setsid sleep {} >/dev/null 2>&1 </dev/null &"],
                         ids=["stdout-inherited", "stdout-redirected"])
def test_a_daemon_started_by_the_benchmark_ends_with_its_step(cli, tmp_path, daemon):
    """issue 22 item 7: a binary that ran `setsid sleep 1000 &` left it running with parent 1; with its stdout
    inherited, the step was judged "timed out after 20 s" although the binary exited 0 with a valid table.
    Now the step passes on the binary's own exit and output, and nothing of it is left."""
    mark = f"1000.{secrets.randbelow(10**6)}"  # the daemon's own argument, to find it
    binary = fake_pingpong(tmp_path, daemon.format(mark))
    results = tmp_path / "r"
    proc = cli.run("suite", str(suite_file(tmp_path, ONE_STEP)), "--pingpong", str(binary), "--results",
                   str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = records_of(results)[ONE]
    assert record.verdict == "pass" and record.repeats[0][0]["size"] == 8, record
    assert processes_naming(f"sleep {mark}") == []
    stopped(cli.cluster)


def test_a_daemon_started_under_mpirun_ends_with_its_step(cli, tmp_path):
    """issue 22 item 7, without Slurm (--launcher mpirun): the step's token in its environment finds the daemon."""
    mark = f"1000.{secrets.randbelow(10**6)}"
    binary = fake_pingpong(tmp_path, f"setsid sleep {mark} &")
    results = tmp_path / "r"
    proc = cli.run("suite", str(suite_file(tmp_path, ONE_STEP)), "--pingpong", str(binary), "--launcher", "mpirun",
                   "--results", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert records_of(results)[ONE].verdict == "pass"
    assert processes_naming(f"sleep {mark}") == []


def test_output_past_the_limit_stops_the_step(cli, tmp_path):
    """issue 22 item 8: 1 GB per rank drove commstack to 6.4 GB and 7 minutes of parsing without a verdict.
    Now the output goes to disk as it comes, and past the limit (here 1 MiB per stream) the step is stopped,
    output-too-large, with the first MiB kept byte for byte."""
    binary = fake_pingpong(tmp_path, '[ "$RANK" = 0 ] && yes "$(printf "%0100d" 0)" | head -c 50000000', table=False)
    results = tmp_path / "r"
    proc = cli.run("suite", str(suite_file(tmp_path, ONE_STEP)), "--pingpong", str(binary), "--results",
                   str(results), env={"COMMSTACK_OUTPUT_LIMIT_MIB": "1"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = records_of(results)[ONE]
    assert record.verdict == "fail" and record.error_kind == "output-too-large", record
    assert "output past the limit of 1 MiB per stream (stdout.txt 1 MiB and more" in record.reason
    kept = (results / record.outputs[0] / "stdout.txt").read_bytes()
    assert len(kept) == 2**20 and kept == (b"0" * 100 + b"\n") * (2**20 // 101) + b"0" * (2**20 % 101)
    assert len(proc.stdout + proc.stderr) < 20_000
    assert processes_naming(str(binary)) == []
    stopped(cli.cluster)


def test_output_past_the_limit_in_a_batch_job_is_cut_and_judged_too_large(cli, tmp_path):
    """issue 22 item 8, batch path: `suite --submit` wrote a step's output to stdout.txt without a limit and
    collecting the job read it whole. The job now cuts each stream a byte past the limit (1 MiB here), and
    `--wait` judges the step output-too-large, with the first MiB kept byte for byte."""
    binary = fake_pingpong(tmp_path, '[ "$RANK" = 0 ] && yes "$(printf "%0100d" 0)" | head -c 50000000', table=False)
    results = tmp_path / "r"
    proc = cli.run("suite", str(suite_file(tmp_path, ONE_STEP)), "--submit", "--wait", "--pingpong", str(binary),
                   "--results", str(results), env={"COMMSTACK_OUTPUT_LIMIT_MIB": "1"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "COMPLETED" in proc.stdout
    record = records_of(results)[ONE]
    assert record.verdict == "fail" and record.error_kind == "output-too-large", record
    assert "output past the limit of 1 MiB per stream (stdout.txt 1 MiB and more" in record.reason
    kept = (results / record.outputs[0] / "stdout.txt").read_bytes()
    assert len(kept) == 2**20 + 1 and kept == (b"0" * 100 + b"\n") * (2**20 // 101) + b"0" * (2**20 % 101 + 1)
    assert processes_naming(str(binary)) == []
    no_job_left(cli.cluster)


def test_a_long_line_is_cut_everywhere_but_in_the_raw_output(cli, tmp_path):
    """issue 22 item 8: one 8 MB line was copied whole to the terminal, record.json, index.html, report.md and
    the history. Now it is cut to 200 characters there; stdout.txt keeps it whole."""
    binary = fake_pingpong(tmp_path, '[ "$RANK" = 0 ] && { head -c 8000000 /dev/zero | tr "\\0" x; echo; }')
    results = tmp_path / "r"
    proc = cli.run("suite", str(suite_file(tmp_path, ONE_STEP)), "--pingpong", str(binary), "--results",
                   str(results), env={"COMMSTACK_HISTORY": str(tmp_path / "history.sqlite")})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = records_of(results)[ONE]
    assert record.error_kind == "unknown-format" and "x" * 200 + "... (7999800 more characters)" in record.reason
    assert len(proc.stdout + proc.stderr) < 20_000
    for path in ("steps/one--" + ONE + "/record.json", "report/index.html", "report/report.md"):
        assert (results / path).stat().st_size < 100_000, path
    assert (tmp_path / "history.sqlite").stat().st_size < 1_000_000
    assert len((results / record.outputs[0] / "stdout.txt").read_bytes().splitlines()[0]) == 8_000_000


def test_a_user_on_the_default_ports_does_not_stop_run(tmp_path):
    """issue 22 item 9: a user listening on 16817 and 16818 made root's next `run` fail, every step not-run
    with "slurmd wrote no pid file". Now the embedded cluster chooses free ports when it starts."""
    squatters = []
    for port in (16817, 16818):
        s = socket.socket()
        try:
            s.bind(("", port))
            s.listen()
            squatters.append(s)
        except OSError:  # someone listens there already: the same test
            s.close()
    cli = Cli(tmp_path / "slurm")
    del cli.env["COMMSTACK_SLURM_PORT"]
    cli.cluster = LocalSlurm(tmp_path / "slurm")
    try:
        results = tmp_path / "r"
        proc = cli.run("run", *cli.no_build, "--results", str(results))
        assert proc.returncode == SMOKE_EXIT, proc.stdout + proc.stderr
        assert read_run(results)[0].verdict == "pass"
        ports = cli.cluster.ports()
        assert ports and not {16817, 16818} & set(ports)
        stopped(cli.cluster)
    finally:
        for s in squatters:
            s.close()
        cli.cluster.stop(force=True)


def test_a_user_without_root_gets_one_clear_message(tmp_path):
    """issue 22 item 12: a user without root got "slurmctld wrote no pid file" five times, with no word that
    the embedded cluster needs root. Now one line says it, before anything starts: exit 2."""
    home = Path(tempfile.mkdtemp(prefix="commstack-nobody-"))  # 0700, under /tmp that nobody can traverse
    nobody = pwd.getpwnam("nobody")
    os.chown(home, nobody.pw_uid, nobody.pw_gid)
    # the venv's Python may live where nobody can run it (pyenv under /root): then the system's, on the venv
    python = sys.executable if os.access(sys.executable, os.X_OK) and not sys.executable.startswith("/root/") \
        else "/usr/bin/python3"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "COMMSTACK_SLURM_DIR": str(home / "slurm"),
           "PYTHONPATH": f"{TOP / 'lib'}:{sysconfig.get_paths()['purelib']}"}
    try:
        proc = subprocess.run(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
                               python, "-m", "commstack", "run", "--no-build", "--results", str(home / "r")],
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr == ("commstack run: error: the embedded Slurm needs root: run as root or with sudo, "
                               "or use --slurm external\n")
        assert not (home / "r").exists() and not (home / "slurm").exists()
    finally:
        shutil.rmtree(home)


def test_ld_preload_reaches_the_benchmark_alone(cli, tmp_path):
    """issue 22 item 12: `variables: {LD_PRELOAD: ...}` loaded into srun and the probe too, and was not in
    variables.json. Now it is recorded, shown on the command line (`env LD_PRELOAD=...`), and loaded into
    the benchmark alone."""
    src = tmp_path / "hello.c"
    src.write_text('#include <stdio.h>\n#include <unistd.h>\n__attribute__((constructor)) static void hello(void) '
                   '{ char exe[256] = {0}; if (readlink("/proc/self/exe", exe, 255) > 0) '
                   'fprintf(stderr, "PRELOADED into %s\\n", exe); }\n')
    lib = tmp_path / "hello.so"
    built = subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    system = tmp_path / "preload.yaml"
    system.write_text((TOP / "systems" / "local.yaml").read_text().replace("name: local", "name: local-preload")
                      + f"variables:\n  LD_PRELOAD: {lib}\n")
    results = tmp_path / "r"
    proc = cli.run("suite", str(suite_file(tmp_path, THREE.replace("500000", "10"))), "--system", str(system),
                   "--slurm", "local", "--results", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    step = results / "steps" / "three--first-cpu-N1-n2-host-native"
    repeat = step / "repeat-0"
    assert json.loads((repeat / "variables.json").read_text())["LD_PRELOAD"] == str(lib)
    assert f"env LD_PRELOAD={lib} " in (repeat / "command.txt").read_text()
    loaded = (repeat / "stderr.txt").read_text().splitlines()
    assert loaded == [f"PRELOADED into {results}/build/mpi-pingpong"] * 2
    assert "PRELOADED" not in (step / "probe" / "stderr.txt").read_text()
    stopped(cli.cluster)


HOLDS_ITS_CLUSTER = """import signal
from pathlib import Path


def test_holds_its_cluster(own_slurm):
    Path({held!r}).write_text(str(own_slurm.root))
    signal.pause()  # until the session is stopped
"""


STOPPED = [("bin/commstack test", signal.SIGTERM, False), ("bin/commstack test", "Ctrl-C", False),
           ("bin/commstack test", signal.SIGTERM, True), ("bin/commstack test", signal.SIGINT, True),
           ("pytest", signal.SIGTERM, False), ("pytest", signal.SIGHUP, True)]


@pytest.mark.parametrize("command, how, background", STOPPED,
                         ids=[f"{c}-{getattr(h, 'name', h)}{'-background' * b}" for c, h, b in STOPPED])
def test_a_test_session_stopped_stops_the_clusters_its_tests_started(tmp_path, command, how, background):
    """A test session stopped while a test held a local Slurm of its own (own_slurm) left slurmctld and slurmd
    running: `bin/commstack test` SIGKILLed pytest 0.25 s after Ctrl-C (subprocess.call), and SIGTERM (a
    cancelled CI job, `timeout`) ended pytest before any fixture's teardown. Now the session stops as at Ctrl-C:
    the cluster is stopped, JUnit XML is written, and `test` exits 128+N. `background`: started as a script's
    background job is (CI's), with SIGINT ignored, which pytest then ignored too."""
    held = tmp_path / "held"
    test = tmp_path / "test_holds.py"
    test.write_text(HOLDS_ITS_CLUSTER.format(held=str(held)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "COMMSTACK_"))}
    env["PYTHONPATH"] = str(TOP / "tests")  # tests/conftest.py, its fixtures and hooks, given with -p conftest
    pytest_args = ["-p", "conftest", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'bt'}",
                   f"--junitxml={tmp_path / 'junit.xml'}"]
    argv = ([str(TOP / "bin" / "commstack"), "test", str(test), "--", *pytest_args] if command == "bin/commstack test"
            else [sys.executable, "-m", "pytest", str(test), *pytest_args])
    if background:
        argv = ["sh", "-c", 'trap "" INT && exec "$@"', "sh", *argv]
    proc = subprocess.Popen(argv, cwd=TOP, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)

    def running() -> bool:
        assert proc.poll() is None, proc.communicate()[0]
        return True
    try:
        wait_until(held.exists, "the test holds its cluster", alive=running)
        cluster = LocalSlurm(Path(held.read_text()))
        assert cluster.processes()
        if how == "Ctrl-C":  # the terminal's: to the whole process group, pytest's too
            os.killpg(proc.pid, signal.SIGINT)
        else:  # to the command alone, as `timeout` and a CI runner's cancel do
            os.kill(proc.pid, how)
        out = proc.communicate(timeout=300)[0]
        left = cluster.processes()  # before the clean-up below
    finally:  # should it fail: nothing of it left either
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if held.exists():
            LocalSlurm(Path(held.read_text())).stop(force=True)
    signum = signal.SIGINT if how == "Ctrl-C" else how
    if command == "bin/commstack test":
        assert proc.returncode == 128 + signum and out.endswith("commstack test: interrupted\n"), out
    else:
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "KeyboardInterrupt" in out and "Traceback" not in out, out
    assert left == [], out
    assert '<testsuite name="pytest"' in (tmp_path / "junit.xml").read_text()  # pytest's, for an interrupted session
