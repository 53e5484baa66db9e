"""The embedded Slurm against a hostile /tmp and against a second user at the same time, for real:
planted symlinks and pid files, two runs sharing one cluster, a run that died with an allocation,
a node left drained."""

import json
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from waits import HANG_S, wait_until

from commstack.errors import CommstackError, SlurmUnavailableError
from commstack.slurm.clients import choose_slurm, site_slurm_answers
from commstack.slurm.cluster import LocalSlurm, NodeDrainedError
from commstack.slurm.config import free_ports

pytestmark = pytest.mark.slurm

# one user of the cluster: start (take a lease), one allocation and step, stop (give it back); its step
# runs until the file `release` exists, so that the test, not the clock, says when it ends
USER = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    from commstack.config import load_system
    from commstack.run.launch import Allocation, Launcher, Step
    from commstack.slurm.cluster import LocalSlurm
    root, ctld, slurmd, release, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], Path(sys.argv[5])
    cluster = LocalSlurm(Path(root), ctld, slurmd)
    cluster.start()
    system = load_system("local")
    with Allocation(system, cluster.variables, nodes=1, ntasks=1) as alloc:
        step = Step("user", ["bash", "-c", f"echo job $SLURM_JOB_ID; until [ -e {release} ]; do sleep 0.2; done; "
                    "echo done"], ntasks=1, timeout_s=900)
        result = Launcher(system, "srun", cluster.variables, alloc).run(step, out)
    print(json.dumps({"job": alloc.job_id, "stdout": result.stdout, "shut_down": cluster.stop()}))
''')


def _user(cluster: LocalSlurm, release: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", USER, str(cluster.root), str(cluster.ctld_port), str(cluster.slurmd_port), str(release),
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _states(cluster: LocalSlurm) -> list[str]:
    try:
        return [state for _, state, _ in cluster.jobs()]
    except SlurmUnavailableError:  # the first user is still starting the cluster
        return []


def _finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 0, err
    return json.loads(out)


@pytest.mark.faults  # two users at once: the faults tier's, through the API (test_cli.py: two runs)
def test_two_users_share_one_cluster_and_the_last_one_stops_it(own_slurm, tmp_path):
    own_slurm.stop()  # the fixture's lease given back: the two users below are all there is
    assert not own_slurm.processes()
    first_done, second_done = tmp_path / "first-done", tmp_path / "second-done"
    first = _user(own_slurm, first_done, tmp_path / "first")
    wait_until(lambda: "RUNNING" in _states(own_slurm), "the first user's job runs", alive=lambda: first.poll() is None)
    second_done.touch()  # the second user's step ends as soon as it runs
    b = _finish(_user(own_slurm, second_done, tmp_path / "second"))
    assert first.poll() is None, "the first user ended with the second"
    first_done.touch()
    a = _finish(first)  # its job was not cancelled by the second user's stop
    assert a["stdout"] == f"job {a['job']}\ndone\n" and b["stdout"] == f"job {b['job']}\ndone\n"
    assert a["job"] != b["job"]
    assert (b["shut_down"], a["shut_down"]) == (False, True)
    assert not own_slurm.processes() and not own_slurm.leases.live()


def test_two_clusters_on_one_host_number_their_jobs_apart(own_slurm, tmp_path):
    """issue 36 item 1: two test runs at once, each with a cluster of its own starting at job 1, ran MPI steps
    of the same PMIx namespace (slurm.pmix.1.1), and Open MPI ranks of one mapped the other's shared memory
    (Segmentation fault in btl_vader). Each cluster now numbers its jobs from its own port."""
    other = LocalSlurm(tmp_path / "other", *free_ports(2))
    other.start()
    try:
        ids = [subprocess.run(["srun", "-n1", "printenv", "SLURM_JOB_ID"], env=c.variables, capture_output=True,
                              text=True, timeout=HANG_S, check=True).stdout.strip() for c in (own_slurm, other)]
    finally:
        other.stop(force=True)
    assert ids == [str(own_slurm.ctld_port * 1000), str(other.ctld_port * 1000)], ids


def test_a_dead_users_allocation_is_cancelled_by_the_next_user(own_slurm):
    crash = textwrap.dedent(f'''
        import os, sys
        from pathlib import Path
        from commstack.config import load_system
        from commstack.run.launch import Allocation
        from commstack.slurm.cluster import LocalSlurm
        cluster = LocalSlurm(Path({str(own_slurm.root)!r}), {own_slurm.ctld_port}, {own_slurm.slurmd_port})
        cluster.start()
        alloc = Allocation(load_system("local"), cluster.variables, nodes=1, ntasks=1).__enter__()
        print(alloc.job_id, flush=True)
        os.kill(os.getpid(), 9)
    ''')
    proc = subprocess.run([sys.executable, "-c", crash], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    job = proc.stdout.strip()
    assert [j[0] for j in own_slurm.jobs()] == [job]
    own_slurm.start()  # another user comes: the dead lease goes, and its job with it
    wait_until(lambda: not own_slurm.jobs(), "the dead user's job is cancelled", poll=0.5)
    assert len(own_slurm.leases.live()) == 1  # ours


def test_a_drained_node_is_resumed(own_slurm):
    node = own_slurm.node_names[0]
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=Kill task failed"],
                   env=own_slurm.variables, check=True, timeout=30)
    assert own_slurm.node_states()[node] == ("drained", "Kill task failed")
    own_slurm.start()
    assert own_slurm.node_states()[node] == ("idle", "")


def test_a_node_that_stays_drained_is_reported(own_slurm):
    """Something keeps draining the node (an admin, a health check): start() resumes it once, then
    names it instead of waiting on or skipping it."""
    node = own_slurm.node_names[0]
    drain = ["scontrol", "update", f"nodename={node}", "state=drain", "reason=held by the test"]
    done = threading.Event()

    def keep_draining() -> None:
        while not done.is_set():
            subprocess.run(drain, env=own_slurm.variables, capture_output=True, timeout=30)
            done.wait(0.1)
    subprocess.run(drain, env=own_slurm.variables, check=True, timeout=30)
    drainer = threading.Thread(target=keep_draining)
    drainer.start()
    try:
        with pytest.raises(NodeDrainedError, match=rf"node {node} is drain(ed|ing) \(held by the test\) and stays so "
                                                   r"after `scontrol update nodename=\.\.\. state=resume`"):
            own_slurm.start(timeout=5)
    finally:
        done.set()
        drainer.join()
    own_slurm.start()  # once nothing drains it, the node is resumed and takes jobs
    assert own_slurm.node_states()[node] == ("idle", "")


def test_a_symlink_in_place_of_slurm_conf_is_replaced_not_followed(own_slurm, tmp_path):
    own_slurm.stop()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    own_slurm.conf.unlink()
    own_slurm.conf.symlink_to(victim)
    own_slurm.start()
    assert victim.read_text() == "precious\n"
    assert not own_slurm.conf.is_symlink()
    assert f"SlurmctldPort={own_slurm.ctld_port}" in own_slurm.conf.read_text()


def test_a_planted_pid_file_is_neither_trusted_nor_signalled(own_slurm):
    own_slurm.stop()
    bystander = subprocess.Popen(["sleep", "300"])
    try:
        run = own_slurm.root / "run"
        run.mkdir(mode=0o700)
        for daemon in ("slurmctld", "slurmd", "munged"):
            (run / f"{daemon}.pid").write_text(f"{bystander.pid}\n")
        assert own_slurm.pid("slurmctld") is None and not own_slurm.running()
        assert "slurmctld: stopped" in own_slurm.status()
        own_slurm.stop()
        own_slurm.start()
        assert own_slurm.running() and own_slurm.pid("slurmctld") != bystander.pid
        own_slurm.stop(force=True)
        assert bystander.poll() is None, "the process named by the planted pid file was signalled"
    finally:
        bystander.kill()
        bystander.wait()


def test_munge_key_is_private_and_a_readable_one_is_refused(own_slurm):
    key = own_slurm.root / "munge" / "munge.key"
    assert key.stat().st_mode & 0o777 == 0o400
    own_slurm.stop()
    key.chmod(0o644)
    with pytest.raises(CommstackError, match=r"munge\.key is not a private file of yours \(mode 0644"):
        own_slurm.start()
    assert not own_slurm.processes()
    key.unlink()


def test_a_site_system_where_no_site_slurm_answers_is_refused(monkeypatch):
    """A site's Slurm that answers is tests/faults/test_cli.py's (a second local cluster plays it)."""
    if Path("/etc/slurm/slurm.conf").exists():
        pytest.skip("this machine has a Slurm configuration of its own (/etc/slurm/slurm.conf)")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    assert choose_slurm("local", "auto") == "embedded" and choose_slurm("local", "off") == "off"
    with pytest.raises(CommstackError, match="system 'alps-gh200' runs on its site's Slurm, and none answers"):
        choose_slurm("alps-gh200", "auto")


def test_our_own_cluster_is_not_taken_for_a_site_slurm(own_slurm, monkeypatch):
    if Path("/etc/slurm/slurm.conf").exists():
        pytest.skip("this machine has a Slurm configuration of its own (/etc/slurm/slurm.conf)")
    monkeypatch.setenv("SLURM_CONF", str(own_slurm.conf))
    assert subprocess.run(["sinfo", "-h"], capture_output=True, timeout=30).returncode == 0
    assert not site_slurm_answers()
