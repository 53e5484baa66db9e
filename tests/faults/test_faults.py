"""Faults injected for real on a local Slurm of the test's own: the controller killed mid-run, a missing
binary, a step that overruns, output that is not UTF-8, a full results file system, a state directory
prepared by someone else. Each asserts what the user is told, that no result was lost, and (the
own_slurm fixture) that no job is queued and no process of the cluster is left."""

import os
import pwd
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from waits import free_port_pair, printed_in_time, wait_until

from commstack.config import load_system
from commstack.errors import BinaryNotFoundError, ControllerLostError, StepCrashedError, StepTimeoutError
from commstack.files import FileWriteError, UnsafePathError
from commstack.run.launch import Allocation, Launcher, Step
from commstack.slurm.cluster import LocalSlurm
from commstack.slurm.config import free_ports

pytestmark = [pytest.mark.faults, pytest.mark.slurm]
TOP = Path(__file__).resolve().parents[2]


@pytest.fixture
def system():
    return load_system("local")


def steps(cluster: LocalSlurm) -> list[str]:
    """The job steps running now, but the `extern` one every allocation has."""
    out = subprocess.run(["squeue", "-h", "-s", "-o", "%i"], env=cluster.variables, capture_output=True, text=True,
                         timeout=30, check=True).stdout.split()
    return [s for s in out if not s.endswith(".extern")]


def test_slurmctld_killed_mid_step(own_slurm, system, tmp_path):
    launcher_steps = [Step(f"s{i}", ["bash", "-c", f"echo begin {i}; sleep 3; echo end {i}"], ntasks=1, timeout_s=60)
                      for i in range(3)]
    outcome: dict = {}
    with Allocation(system, own_slurm.variables, nodes=1, ntasks=1) as alloc:
        launcher = Launcher(system, "srun", own_slurm.variables, alloc)

        def run(i: int) -> None:
            try:
                outcome[i] = launcher.run(launcher_steps[i], tmp_path / f"s{i}")
            except Exception as e:  # noqa: BLE001 - judged below
                outcome[i] = e

        first = threading.Thread(target=run, args=(0,))
        first.start()
        wait_until(lambda: steps(own_slurm), "the first step starts", alive=first.is_alive, poll=0.2)
        os.kill(own_slurm.pid("slurmctld"), signal.SIGKILL)
        first.join()
        run(1)
        run(2)
    # the step under way ends on its own (srun talks to slurmstepd), its output kept either way
    assert (tmp_path / "s0" / "stdout.txt").read_text() == "begin 0\nend 0\n"
    assert isinstance(outcome[1], ControllerLostError), outcome[1]
    assert "the Slurm controller stopped answering during step s1" in str(outcome[1])
    assert isinstance(outcome[2], ControllerLostError) and "s2: not run" in str(outcome[2])
    assert not (tmp_path / "s2").exists()  # never launched
    assert own_slurm.stop() is True
    assert not own_slurm.processes()  # slurmd, munged, and the slurmstepd that outlived the controller
    own_slurm.start()  # comes back clean: no job of the old controller recovered
    assert own_slurm.jobs() == []


def test_missing_benchmark_binary(own_slurm, system, tmp_path):
    with Allocation(system, own_slurm.variables, nodes=1, ntasks=1) as alloc:
        launcher = Launcher(system, "srun", own_slurm.variables, alloc)
        with pytest.raises(BinaryNotFoundError, match=r"s: benchmark binary '/nonexistent/osu_latency' not found"):
            launcher.run(Step("s", ["/nonexistent/osu_latency"], ntasks=1), tmp_path / "s")
        assert steps(own_slurm) == []
    assert "/nonexistent/osu_latency" in (tmp_path / "s" / "command.txt").read_text()


def test_step_that_times_out(own_slurm, system, tmp_path):
    """A step past its timeout ends with the named error, the output it printed before kept, its process gone.
    The task marks that it printed (`printed`, written after its echo); where srun started it too late for
    that on a loaded machine, it runs again with a longer timeout (waits.printed_in_time)."""
    with Allocation(system, own_slurm.variables, nodes=1, ntasks=1) as alloc:
        launcher = Launcher(system, "srun", own_slurm.variables, alloc)

        def attempt(timeout_s: int) -> bool:
            out, printed = tmp_path / f"slow-{timeout_s}", tmp_path / f"printed-{timeout_s}"
            step = Step("slow", ["bash", "-c", 'echo started; : > "$0"; exec sleep 300', str(printed)], ntasks=1,
                        timeout_s=timeout_s)
            with pytest.raises(StepTimeoutError, match=f"slow: step timed out after {timeout_s} s"):
                launcher.run(step, out)
            wait_until(lambda: not steps(own_slurm), "the timed-out step ends", poll=0.5)
            assert '"error": "timed-out"' in (out / "step.json").read_text()
            assert not [p for p in own_slurm.processes() if _cmdline(p).startswith("sleep 300")]
            kept = (out / "stdout.txt").read_text()
            assert kept == "started\n" or (kept == "" and not printed.exists()), kept
            return printed.exists()
        printed_in_time(attempt, 15)


def test_a_rank_that_dies_ends_its_step_at_once(own_slurm, system, tmp_path):
    """Rank 1 segfaults while rank 0 would wait for it for 5 minutes: the step fails as crashed, now."""
    script = 'if [ "$SLURM_PROCID" = 1 ]; then kill -SEGV $$; fi; exec sleep 300'
    step = Step("crash", ["bash", "-c", script], ntasks=2, timeout_s=300)
    with Allocation(system, own_slurm.variables, nodes=1, ntasks=2) as alloc:
        with pytest.raises(StepCrashedError, match=r"crash: killed by a signal .*Segmentation fault"):
            Launcher(system, "srun", own_slurm.variables, alloc).run(step, tmp_path / "crash")
    assert not [p for p in own_slurm.processes() if _cmdline(p).startswith("sleep 300")]


def test_output_that_is_not_utf8_is_kept_byte_for_byte(own_slurm, system, tmp_path):
    step = Step("bytes", ["bash", "-c", r"printf 'ok \xff\xfe\n'; printf 'bad \xc3\x28\n' >&2"], ntasks=1)
    with Allocation(system, own_slurm.variables, nodes=1, ntasks=1) as alloc:
        result = Launcher(system, "srun", own_slurm.variables, alloc).run(step, tmp_path / "bytes")
    assert (tmp_path / "bytes" / "stdout.txt").read_bytes() == b"ok \xff\xfe\n"
    assert (tmp_path / "bytes" / "stderr.txt").read_bytes() == b"bad \xc3\x28\n"
    assert result.stdout == "ok \ufffd\ufffd\n" and result.stderr == "bad \ufffd(\n"


def test_results_on_a_full_file_system(own_slurm, system, small_fs):
    with Allocation(system, own_slurm.variables, nodes=1, ntasks=1) as alloc:
        launcher = Launcher(system, "srun", own_slurm.variables, alloc)
        launcher.run(Step("before", ["echo", "kept"], ntasks=1), small_fs / "before")
        free = os.statvfs(small_fs)
        (small_fs / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize - 32768))
        big = Step("big", ["bash", "-c", "head -c 300000 /dev/zero | tr '\\0' x"], ntasks=1)
        with pytest.raises(FileWriteError, match=r"cannot write .*/big/stdout\.txt: No space left on device"):
            launcher.run(big, small_fs / "big")
        assert steps(own_slurm) == []
    assert (small_fs / "before" / "stdout.txt").read_text() == "kept\n"
    assert '"returncode": 0' in (small_fs / "before" / "step.json").read_text()
    assert not list(small_fs.rglob("*.tmp")), "a temporary file was left"


@pytest.fixture
def cluster_in(tmp_path):
    """A local Slurm whose directory the test prepares first, as another local user could."""
    def make(prepare) -> LocalSlurm:
        root = tmp_path / "state"
        prepare(root)
        return LocalSlurm(root, *free_ports(2))
    return make


def test_state_dir_that_is_a_symlink(cluster_in, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    cluster = cluster_in(lambda root: root.symlink_to(target))
    with pytest.raises(UnsafePathError, match=r"state is a symlink; commstack keeps state only in a real directory"):
        cluster.start()
    with pytest.raises(UnsafePathError):
        cluster.stop()
    assert list(target.iterdir()) == [] and not cluster.processes()


def test_state_dir_of_another_owner(cluster_in):
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another user needs root")
    nobody = pwd.getpwnam("nobody").pw_uid

    def foreign(root: Path) -> None:
        root.mkdir(mode=0o700)
        os.chown(root, nobody, -1)
    cluster = cluster_in(foreign)
    with pytest.raises(UnsafePathError, match=rf"state belongs to uid {nobody}, not to you \(uid 0\)"):
        cluster.start()
    assert list(cluster.root.iterdir()) == [] and not cluster.processes()


def test_state_dir_open_to_everyone(cluster_in):
    def open_dir(root: Path) -> None:
        root.mkdir()
        root.chmod(0o777)
    cluster = cluster_in(open_dir)
    with pytest.raises(UnsafePathError, match=r"state has mode 0777; it must be 0700"):
        cluster.start()
    assert list(cluster.root.iterdir()) == [] and not cluster.processes()


def test_state_dir_under_a_parent_others_may_change(cluster_in, tmp_path):
    """Another user could rename a private directory away from under a parent they may write."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    cluster = LocalSlurm(shared / "state", *free_ports(2))
    with pytest.raises(UnsafePathError, match=r"state: its parent .*/shared has mode 0777, writable by others "
                                              "without the sticky bit"):
        cluster.start()
    assert not (shared / "state").exists()
    shared.chmod(0o1777)  # as /tmp: others may not rename what is ours
    assert cluster.check_state() == shared / "state"
    if os.geteuid() == 0:
        os.chown(shared, pwd.getpwnam("nobody").pw_uid, -1)
        with pytest.raises(UnsafePathError, match=r"its parent .*/shared belongs to uid \d+; keep commstack's"):
            cluster.check_state()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_slurm_stop_on_the_command_line_leaves_no_process(tmp_path):
    port = free_port_pair()
    env = {**os.environ, "COMMSTACK_SLURM_DIR": str(tmp_path / "state"), "COMMSTACK_SLURM_PORT": str(port)}
    cli = [str(TOP / "bin" / "commstack"), "slurm"]
    up = subprocess.run([*cli, "start"], env=env, capture_output=True, text=True, timeout=120)
    if up.returncode != 0:
        pytest.skip(f"the local Slurm cannot start here: {up.stderr.strip()}")
    cluster = LocalSlurm(tmp_path / "state", port, port + 1)
    try:
        job = subprocess.Popen(["srun", "-n1", "-t5", "sleep", "300"], env=cluster.variables, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        wait_until(lambda: _tasks(cluster), "the step starts", alive=lambda: job.poll() is None, poll=0.2)
        running = {_exe_name(p) for p in cluster.processes()}
        assert {"slurmctld", "slurmd", "slurmstepd", "munged"} <= running, running
        down = subprocess.run([*cli, "stop"], env=env, capture_output=True, text=True, timeout=120)
        assert down.returncode == 0 and "local Slurm (1 node) stopped" in down.stdout, down.stdout + down.stderr
        # srun ends with the cluster; its exit code depends on whether the task's end reached it before
        # slurmstepd went (0 or not), so only its ending is ours to check. It may retry the gone controller
        # first (over 30 s while a second test run loads the machine): wait for the end, not for a time
        wait_until(lambda: job.poll() is not None, "srun ends with the cluster")
        assert cluster.processes() == []
        assert not _tasks(cluster)
    finally:
        cluster.stop(force=True)


def _exe_name(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")).removesuffix("-wlm")
    except OSError:
        return ""


def _tasks(cluster: LocalSlurm) -> list[int]:
    """The `sleep 300` tasks that this cluster's srun started (srun passes SLURM_CONF on to them)."""
    mark = f"SLURM_CONF={cluster.conf}".encode()
    found = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            task = _cmdline(pid).split()[:2] in (["sleep", "300"], ["/usr/bin/sleep", "300"])
            if task and mark in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                found.append(pid)
        except OSError:
            pass
    return found
