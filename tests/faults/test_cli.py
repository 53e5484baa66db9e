"""Faults met through the command a user types, `bin/commstack run` (or `suite` for a step long enough
to interrupt), on a local Slurm of the test's own (COMMSTACK_SLURM_DIR, COMMSTACK_SLURM_PORT): Ctrl-C once
and three times, two runs at once, slurmctld killed, the allocation cancelled, a full results file system,
a missing benchmark, a state directory prepared by someone else, a site's Slurm and its SLURM_JOB_ID around
the run. Each checks the exit status, the records and the report, and that no job and no process of ours
is left."""

import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from checkouts import without_osu
from waits import HANG_S, free_port_pair, queue_empties, ranks_busy, wait_until

from commstack.files import UnsafePathError
from commstack.results.records import read_run
from commstack.run import pair
from commstack.tools.osu_install import OSU_HINT
from commstack.slurm.cluster import DAEMONS, LocalSlurm
from commstack.slurm.procs import exe

pytestmark = [pytest.mark.faults, pytest.mark.slurm]
TOP = Path(__file__).resolve().parents[2]
# an OSU install for the smoke suite's OSU steps; without one the runs are on a checkout with no OSU in reach
# (checkouts.without_osu): fi_pingpong, ucx_perftest and mpi-pingpong run, the OSU steps are not-run (exit 3)
OSU = os.environ.get("COMMSTACK_OSU_PREFIX") or None
SMOKE_EXIT = 0 if OSU else 3

LONG = """name: long
description: a ping-pong that runs for minutes, then one that never starts
steps:
- {id: long, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 8], args: [-n, 2000000000],
   timeout_s: 600}
- {id: after, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 64], args: [-n, 10]}
"""
LONG_STEP, AFTER_STEP = "long-cpu-N1-n2-host-native", "after-cpu-N1-n2-host-native"
# about 5 s: long enough to kill slurmctld under it
THREE = """name: three
description: a ping-pong of a few seconds, then two short ones
steps:
- {id: first, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 8], args: [-n, 500000]}
- {id: second, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 64], args: [-n, 10]}
- {id: third, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 64], args: [-n, 10]}
"""


def fill(fs: Path) -> None:
    """Every free block of `fs` taken."""
    with open(fs / "filler", "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 4096)


class Cli:
    """bin/commstack in an environment of its own: no site Slurm variables, and the local Slurm in
    `root` on ports chosen free now (COMMSTACK_SLURM_PORT); with OSU where COMMSTACK_OSU_PREFIX names one,
    else on a checkout beside `root` that has none (checkouts.without_osu), without building it (--no-build)."""

    def __init__(self, root: Path):
        port = free_port_pair()
        self.cluster = LocalSlurm(root, port, port + 1)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "COMMSTACK_"))}
        self.env.update(COMMSTACK_SLURM_DIR=str(root), COMMSTACK_SLURM_PORT=str(port))
        self.no_build: list[str] = []
        if OSU:
            self.env["COMMSTACK_OSU_PREFIX"] = OSU
        else:
            self.without_osu()

    def without_osu(self) -> None:
        """Its runs on a checkout that has no OSU in reach, beside the cluster's directory, building none."""
        if "COMMSTACK_HOME" not in self.env:
            self.env = without_osu(self.cluster.root.parent, self.env)
        self.no_build = ["--no-build"]

    def start(self, *args: str, env: dict | None = None) -> subprocess.Popen:
        return subprocess.Popen([str(TOP / "bin" / "commstack"), *args], env={**self.env, **(env or {})},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def run(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        proc = self.start(*args, env=env)
        out, err = proc.communicate(timeout=600)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture
def cli(tmp_path):
    c = Cli(tmp_path / "slurm")
    yield c
    with contextlib.suppress(UnsafePathError):  # the tests that prepare a hostile state directory
        c.cluster.stop(force=True)


def suite_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suites" / (text.split("\n", 1)[0].removeprefix("name: ") + ".yaml")
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def job_steps(cluster: LocalSlurm) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-s", "-o", "%i"], env=cluster.variables, capture_output=True, text=True,
                         timeout=30)
    return [s for s in out.stdout.split() if not s.endswith(".extern")]


def wait_for_step(proc: subprocess.Popen, cluster: LocalSlurm, outdir: Path) -> None:
    """Until the run's step runs under srun and has its directory."""
    def running() -> bool:
        assert proc.poll() is None, proc.communicate()  # the run ended first: its output says why
        return True
    wait_until(lambda: (outdir / "command.txt").exists() and cluster.pid("slurmctld") and job_steps(cluster),
               "the step starts", alive=running)


def wait_for_pingpong(proc: subprocess.Popen, cluster: LocalSlurm, outdir: Path) -> None:
    """Until the run's mpi-pingpong ranks are ping-ponging (its header printed, srun holding it until the end)."""
    wait_for_step(proc, cluster, outdir)
    binary = str(outdir.parents[2] / "build" / "mpi-pingpong")  # <results>/steps/<step>/repeat-0
    wait_until(lambda: ranks_busy(binary), "the ping-pong runs", alive=lambda: proc.poll() is None)


def no_job_left(cluster: LocalSlurm) -> None:
    """The queue of a cluster still up is empty (only a COMPLETING job is waited for), and only its daemons
    run: no slurmstepd, no task (those of a COMPLETING job end with it)."""
    queue_empties(cluster)
    wait_until(lambda: not [p for p in cluster.processes() if _program(p) not in DAEMONS],
               "no task of the cluster left", poll=0.5)


def _program(pid: int) -> str:
    return os.path.basename(exe(pid) or "").removesuffix("-wlm")  # Debian's slurmctld-wlm, slurmd-wlm


def stopped(cluster: LocalSlurm) -> None:
    """The run that was the cluster's only user stopped it: no process of it and no lease is left."""
    assert cluster.processes() == [] and cluster.leases.live() == []


def records_of(results: Path) -> dict:
    return {r.step: r for r in read_run(results)}


@pytest.mark.parametrize("presses, shared", [(1, False), (3, False), (None, True)])
def test_ctrl_c_cancels_the_step_keeps_its_output_and_stops_everything(cli, tmp_path, presses, shared):
    """Ctrl-C once, three times 0.5 s apart, or every 0.3 s until the command ends (the later ones held
    off until it is done); with the cluster shared (the test holds a lease), the run cancels its job and
    leaves the daemons up."""
    if shared:
        cli.cluster.start()
    results = tmp_path / "r"
    proc = cli.start("suite", str(suite_file(tmp_path, LONG)), "--results", str(results))
    out = results / "steps" / f"long--{LONG_STEP}" / "repeat-0"
    wait_for_pingpong(proc, cli.cluster, out)
    for i in range(presses or 1000):
        if proc.poll() is not None:
            break
        time.sleep((0.5 if presses else 0.3) if i else 0)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends to the foreground group
    text, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, text + err
    assert "interrupted: cleaning up, please wait (Ctrl-C again is ignored until done)" in text + err
    assert f"commstack suite: interrupted; partial results and report in {results}" in err
    assert "Traceback" not in text + err
    assert "KeyboardInterrupt" not in text + err and "KeyboardInterrupt" in (results / "pytest.log").read_text()
    records = records_of(results)
    assert records[LONG_STEP].verdict == "not-run"
    assert records[LONG_STEP].reason == "interrupted (Ctrl-C); its output so far is kept"
    assert records[LONG_STEP].outputs == [str(out.relative_to(results))]
    assert "# mpi-pingpong v" in (out / "stdout.txt").read_text()  # its output so far is kept
    assert records[AFTER_STEP].reason == "interrupted (Ctrl-C) before this step"
    assert "2 steps: 2 not-run" in (results / "report" / "index.html").read_text()
    if shared:
        no_job_left(cli.cluster)
        assert cli.cluster.stop() is True
    stopped(cli.cluster)


OSU_STEPS = ["osu_latency-N1-n2-host-native", "osu_bw-N1-n2-host-native", "osu_allreduce-N1-n2-host-native",
             "osu_alltoall-N1-n3-host-native"]


def test_run_without_osu_shows_its_own_view_and_each_reason_once(cli, tmp_path):
    """`bin/commstack run` as on a fresh clone offline, its output a pipe: commstack's lines, not pytest's;
    the not-run reason once, with the four steps it covers; pytest's output in pytest.log."""
    cli.without_osu()
    results = tmp_path / "r"
    proc = cli.run("run", *cli.no_build, "--results", str(results))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["commstack run: suite smoke on system local, 7 steps, srun --mpi=pmix", f"results: {results}"]
    # a figure and a time as a loaded machine shows them too: 6,700 µs, 1 min 05 s
    figure, took = r"[0-9.,]+", r"(\d+ min \d\d|[0-9.]+) s"
    assert re.fullmatch(rf"pass {{9}}fi_pingpong-N1-n2-host-native  fi_pingpong 1 MiB: {figure} GB/s  {took}",
                        lines[3]), proc.stdout
    for shown in (rf"pass {{9}}ucx_perftest-tag_lat-N1-n2-host-native  ucx_perftest-tag_lat 8 B: {figure} µs  {took}",
                  rf"pass {{9}}mpi-pingpong-cpu-N1-n2-host-native  mpi-pingpong 1 MiB: {figure} GiB/s  {took}"):
        assert any(re.fullmatch(shown, line) for line in lines), proc.stdout
    reason = [i for i, line in enumerate(lines) if "no OSU micro-benchmarks here" in line]
    assert len(reason) == 1, proc.stdout
    assert lines[reason[0]:reason[0] + 2] == [f"not-run: no OSU micro-benchmarks here: {OSU_HINT}",
                                              f"    4 steps: {', '.join(OSU_STEPS)}"]
    assert lines[-1] == "exit 3: every step that ran passed, but some did not run (--allow-not-run accepts that)"
    log = (results / "pytest.log").read_text()
    # pytest's summary line, not its per-test one: -v drops a skip's reason where the node id is long (a checkout
    # under a deep tmp path) and the line would pass the terminal's width
    for pytests in ("test session starts", "SKIPPED [4] ", "short test summary info"):
        assert pytests not in proc.stdout and pytests in log
    assert f"not run: no OSU micro-benchmarks here: {OSU_HINT}" in log
    assert "Traceback" not in proc.stdout + proc.stderr and "\x1b" not in proc.stdout  # a pipe: no colour
    stopped(cli.cluster)


def test_run_json_is_one_object_per_line(cli, tmp_path):
    results = tmp_path / "r"
    proc = cli.run("run", *cli.no_build, "--json", "--results", str(results))
    assert proc.returncode == SMOKE_EXIT, proc.stdout + proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [e["event"] for e in events if e["event"] != "note"] == \
        ["run-started"] + ["step-started", "step-ended"] * 7 + ["run-ended"]
    ended = {e["step"]: e for e in events if e["event"] == "step-ended"}
    pingpong = ended["mpi-pingpong-cpu-N1-n2-host-native"]
    assert pingpong["verdict"] == "pass" and pingpong["figure"]["unit"] == "GiB/s" and pingpong["figure"]["value"] > 0
    assert [ended[s]["verdict"] for s in OSU_STEPS] == ["pass" if OSU else "not-run"] * 4
    assert events[-1]["exit"] == SMOKE_EXIT and events[-1]["counts"] == ({"pass": 7} if OSU else
                                                                         {"pass": 3, "not-run": 4})
    assert "test session starts" in (results / "pytest.log").read_text()
    stopped(cli.cluster)


def test_run_into_a_reader_that_goes_away_ends_cleanly(cli, tmp_path):
    """`bin/commstack run | head -1`: no BrokenPipe traceback; the run goes on, records every step and
    cleans up."""
    results = tmp_path / "r"
    proc = subprocess.run(["bash", "-c", 'set -o pipefail; "$@" | head -1', "bash", str(TOP / "bin" / "commstack"),
                           "run", *cli.no_build, "--results", str(results)], env=cli.env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == SMOKE_EXIT, proc.stdout + proc.stderr  # pipefail: commstack's status
    assert proc.stdout == "commstack run: suite smoke on system local, 7 steps, srun --mpi=pmix\n"
    assert "BrokenPipe" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(read_run(results)) == 7 and (results / "report" / "index.html").is_file()
    stopped(cli.cluster)


def test_two_runs_at_once_each_complete_in_their_own_allocation(cli, tmp_path):
    procs = [cli.start("run", *cli.no_build, "--results", str(tmp_path / name)) for name in "ab"]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == SMOKE_EXIT, out + err
    runs = [read_run(tmp_path / name) for name in "ab"]
    jobs = []
    for records in runs:
        assert len(records) == 7
        assert {r.verdict for r in records} == ({"pass"} if OSU else {"pass", "not-run"})
        ran = [r for r in records if r.verdict == "pass"]
        jobs.append({r.commands[0][1] for r in ran})
    assert len(jobs[0]) == len(jobs[1]) == 1 and jobs[0] != jobs[1]  # --jobid=N: one allocation each
    stopped(cli.cluster)


def test_slurmctld_killed_mid_run(cli, tmp_path):
    results = tmp_path / "r"
    proc = cli.start("suite", str(suite_file(tmp_path, THREE)), "--results", str(results))
    first = results / "steps" / "three--first-cpu-N1-n2-host-native" / "repeat-0"
    wait_for_step(proc, cli.cluster, first)
    os.kill(cli.cluster.pid("slurmctld"), signal.SIGKILL)
    text, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 3, text + err
    records = records_of(results)
    r1, r2, r3 = (records[f"{n}-cpu-N1-n2-host-native"] for n in ("first", "second", "third"))
    # the step under way ends on its own (srun talks to slurmstepd), or meets the lost controller
    assert r1.verdict == "pass" or r1.error_kind == "controller-lost", r1
    assert "# mpi-pingpong v" in (first / "stdout.txt").read_text()
    lost = [r for r in (r1, r2, r3) if r.error_kind == "controller-lost"]
    assert "the Slurm controller stopped answering during step" in lost[0].reason
    assert r3.verdict == "not-run" and r3.error_kind == "controller-lost"
    assert r3.reason.startswith("third-cpu-N1-n2-host-native: not run: the Slurm controller")
    assert not (results / "steps" / "three--third-cpu-N1-n2-host-native" / "repeat-0").exists()  # never launched
    assert "3 steps: " in (results / "report" / "index.html").read_text()
    assert "Traceback" not in text + err
    stopped(cli.cluster)


def test_the_allocation_cancelled_mid_run(cli, tmp_path):
    """Someone scancels the run's job: the step under way and the later ones are not-run, allocation lost."""
    results = tmp_path / "r"
    proc = cli.start("suite", str(suite_file(tmp_path, LONG)), "--results", str(results))
    wait_for_step(proc, cli.cluster, results / "steps" / f"long--{LONG_STEP}" / "repeat-0")
    (job, _, _), = cli.cluster.jobs()
    subprocess.run(["scancel", job], env=cli.cluster.variables, check=True, timeout=30)
    text, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, text + err
    records = records_of(results)
    assert [(r.verdict, r.error_kind) for r in records.values()] == [("not-run", "allocation-lost")] * 2
    assert f"the allocation (job {job}) ended during step long" in records[LONG_STEP].reason
    assert records[AFTER_STEP].reason.startswith(f"{AFTER_STEP}: not run: the allocation")
    assert "2 steps: 2 not-run" in (results / "report" / "index.html").read_text()
    stopped(cli.cluster)


def test_results_on_a_full_file_system(cli, small_fs, pingpong):
    """The verdicts on the terminal all the same, one named error, exit 5; nothing left running."""
    results = small_fs / "r"
    results.mkdir()
    fill(small_fs)
    proc = cli.run("run", *cli.no_build, "--pingpong", str(pingpong), "--results", str(results))
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "INTERNALERROR" not in proc.stdout + proc.stderr and "Traceback" not in proc.stdout + proc.stderr
    assert (f"commstack run: error: results directory full: cannot write {results}/steps/"
            in proc.stderr), proc.stderr
    verdicts = [line.split() for line in proc.stdout.splitlines() if line.startswith("  ") and "smoke/" in line]
    assert len(verdicts) == 7 and [v[1] for v in verdicts][0] == "smoke/fi_pingpong-N1-n2-host-native:"
    assert "not saved" in proc.stdout  # the verdicts say that their records could not be written
    stopped(cli.cluster)  # the allocation released, the daemons stopped (audit: job 1 stayed RUNNING)
    assert not list(small_fs.rglob("*.tmp")), "a temporary file was left"


def test_a_missing_benchmark_binary(cli, tmp_path):
    cli.cluster.start()  # this test's lease: the cluster stays up after the run, its queue can be read
    results = tmp_path / "r"
    proc = cli.run("run", "--osu-prefix", "/nonexistent", "--results", str(results))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    records = read_run(results)
    assert [r.verdict for r in records] == ["pass"] * 3 + ["not-run"] * 4
    assert {r.reason for r in records[3:]} == {
        "/nonexistent is not an OSU install (no /nonexistent/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency): "
        "give an OSU install with --osu-prefix PREFIX (or COMMSTACK_OSU_PREFIX=PREFIX), or let `commstack run` build "
        "it with the pinned Spack (without --no-build)"}
    assert "7 steps: 3 pass, 4 not-run" in (results / "report" / "index.html").read_text()
    no_job_left(cli.cluster)
    assert cli.cluster.stop() is True
    stopped(cli.cluster)


def _symlink(root: Path) -> str:
    (root.parent / "elsewhere").mkdir(mode=0o700)
    root.symlink_to(root.parent / "elsewhere")
    return f"{root} is a symlink; commstack keeps state only in a real directory of its own"


def _open(root: Path) -> str:
    root.mkdir()
    root.chmod(0o777)
    return f"{root} has mode 0777; it must be 0700 (chmod 700 {root}, or remove it)"


def _foreign(root: Path) -> str:
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another user needs root")
    root.mkdir(mode=0o700)
    nobody = pwd.getpwnam("nobody").pw_uid
    os.chown(root, nobody, -1)
    return f"{root} belongs to uid {nobody}, not to you (uid 0); remove it or choose another directory"


@pytest.mark.parametrize("prepare", [_symlink, _open, _foreign], ids=["symlink", "mode-0777", "other-owner"])
def test_a_prepared_state_directory_is_refused_before_any_step(cli, tmp_path, prepare):
    message = prepare(cli.cluster.root)
    results = tmp_path / "r"
    proc = cli.run("run", *cli.no_build, "--results", str(results))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"commstack run: error: {message}" in proc.stderr
    assert "[step" not in proc.stdout and "Traceback" not in proc.stdout + proc.stderr
    assert not results.exists()  # nothing launched
    assert cli.cluster.processes() == []
    if prepare is _symlink:
        assert list((tmp_path / "slurm").resolve().iterdir()) == []


def test_under_plain_pytest_a_prepared_state_directory_makes_the_steps_not_run(cli, tmp_path):
    """`pytest suites/smoke.yaml` has no refusal up front: every step that needs Slurm is not-run with the
    reason, from one attempt to start it."""
    message = _open(cli.cluster.root)
    results = tmp_path / "r"
    proc = subprocess.run([sys.executable, "-m", "pytest", "suites/smoke.yaml", "--results", str(results),
                           "-p", "no:cacheprovider", *cli.no_build], cwd=TOP, env=cli.env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout  # not-run steps are skipped tests
    slurm = [r for r in read_run(results) if r.error_kind != "binary-not-found"]  # no OSU: not-run before
    assert slurm and {(r.verdict, r.error_kind, r.reason) for r in slurm} == {("not-run", "unsafe-path", message)}
    assert cli.cluster.processes() == []


@pytest.fixture
def site(own_slurm, tmp_path):
    """A second local cluster playing the site's Slurm of a login node: sinfo answers through SLURM_CONF,
    a copy of its slurm.conf without our mark (a site's own file)."""
    conf = tmp_path / "site-slurm.conf"
    conf.write_text(own_slurm.conf.read_text().split("\n", 1)[1])
    return own_slurm, conf


def scontrol_jobs(cluster: LocalSlurm) -> str:
    return subprocess.run(["scontrol", "show", "jobs"], env=cluster.variables, capture_output=True, text=True,
                          timeout=30).stdout


def test_run_on_a_login_node_stays_on_the_embedded_slurm(cli, site, tmp_path):
    """Inside a site allocation (SLURM_CONF, SLURM_JOB_ID=4242 and friends), `run` uses the embedded cluster
    and an allocation of its own."""
    site_cluster, conf = site
    results = tmp_path / "r"
    login = {"SLURM_CONF": str(conf), "SLURM_JOB_ID": "4242", "SLURM_JOBID": "4242", "SLURM_NODELIST": "nid0001"}
    assert subprocess.run(["sinfo", "-h"], env={**cli.env, **login}, capture_output=True).returncode == 0
    proc = cli.run("run", *cli.no_build, "--results", str(results), env=login)
    assert proc.returncode == SMOKE_EXIT, proc.stdout + proc.stderr
    ran = [r for r in read_run(results) if r.verdict != "not-run"]
    assert ran and {r.verdict for r in ran} == {"pass"}
    assert "--jobid=4242" not in {r.commands[0][1] for r in ran}
    env = json.loads((results / ran[0].outputs[0] / "variables.json").read_text())
    assert env["SLURM_CONF"] == str(cli.cluster.conf) and "SLURM_NODELIST" not in env
    assert scontrol_jobs(site_cluster).startswith("No jobs in the system")
    stopped(cli.cluster)


def test_a_system_that_names_the_site_runs_on_the_site(cli, site, tmp_path):
    site_cluster, conf = site
    system = tmp_path / "site.yaml"
    system.write_text((TOP / "systems" / "local.yaml").read_text().replace("name: local", "name: login-site"))
    results = tmp_path / "r"
    suite = suite_file(tmp_path, THREE.replace("500000", "10"))
    proc = cli.run("suite", str(suite), "--system", str(system), "--results", str(results),
                   env={"SLURM_CONF": str(conf)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = read_run(results)
    env = json.loads((results / records[0].outputs[0] / "variables.json").read_text())
    assert env["SLURM_CONF"] == str(conf)
    assert "JobName=commstack\n" in scontrol_jobs(site_cluster)
    assert not cli.cluster.root.exists()  # the embedded cluster was never started


# the step's timeout: the pair's own deadline is short of it by 10 s (pair.placed), time for srun to start both
# tasks' Python and to end the step on a loaded machine (30 s left only 5 s, and the step's timeout came first);
# srun's own limit, whole minutes (-t2), comes 20 s after it
SERVERLESS_TIMEOUT_S = 100
SERVERLESS = f"""name: serverless
description: fi_pingpong whose server never starts listening
steps:
- {{benchmark: fi_pingpong, nodes: 1, ranks_per_node: 2, args: [-e, rdm, -I, 5], timeout_s: {SERVERLESS_TIMEOUT_S}}}
"""


def test_a_client_whose_server_never_starts_ends_in_time_with_a_named_error(cli, tmp_path):
    """fi_pingpong's server replaced by one that never listens (first on PATH): the client waits for its
    address until the pair's deadline, short of the step's timeout; the step fails with the pair's own
    error, and neither the client, the server nor any job is left."""
    if not shutil.which("fi_pingpong"):
        pytest.skip("no fi_pingpong (Debian: apt-get install libfabric-bin)")
    fake = tmp_path / "bin" / "fi_pingpong"
    fake.parent.mkdir()
    # the server's command line has -B PORT, the client's -P PORT HOST; `mark` is our sleeper's alone (a second
    # test run beside this one has its own): always 6 digits, matched as a whole argument
    mark = f"4242.{secrets.randbelow(10**6):06d}"
    fake.write_text(f"#!/bin/sh\ncase \" $* \" in *\" -B \"*) exec sleep {mark};; esac\n"
                    f"exec {shutil.which('fi_pingpong')} \"$@\"\n")
    fake.chmod(0o755)
    cli.cluster.start()
    results = tmp_path / "r"
    proc = cli.run("suite", str(suite_file(tmp_path, SERVERLESS)), "--results", str(results),
                   env={"PATH": f"{fake.parent}:{cli.env['PATH']}"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (record,) = read_run(results)
    assert (record.verdict, record.error_kind) == ("fail", "pair-failed")
    # whichever side met the deadline first names it; the client then says the server did not start
    assert re.match(r"fi_pingpong-N1-n2-host-native: (client: the server never published its address before the "
                    r"step's timeout|(client: the server did not start: |server: )the server \(fi_pingpong\) did not "
                    r"listen on port \d+ before the step's timeout)", record.reason), record.reason
    step = json.loads((results / record.outputs[0] / "step.json").read_text())
    # the pair waited out its own deadline; the error it named (not timed-out) says it came before the step's
    own = int(pair.placed([pair.TIMEOUT], Path(), SERVERLESS_TIMEOUT_S)[0])
    assert step["elapsed_s"] >= own and step["error"] == "pair-failed", step
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and mark.encode() in _cmdline(p).split(b"\0")]
    no_job_left(cli.cluster)
    assert cli.cluster.stop() is True
    stopped(cli.cluster)


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""
