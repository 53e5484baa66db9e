"""Issue 32 item 16: the multi-node local cluster is one per machine and outlives the checkout that started it.
Started from a clone that is then deleted, every later `srun -N2` printed "env: '.../.venv/bin/python': No such
file or directory" and "task-epilog failed status=32512" on each node. Through `bin/commstack slurm start`."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from commstack.slurm.cluster import LocalSlurm
from waits import namespace_cluster_alone

pytestmark = pytest.mark.multinode
TOP = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def alone(pytestconfig):
    with namespace_cluster_alone(pytestconfig):
        yield


def test_a_cluster_whose_checkout_is_gone_is_restarted_by_the_next(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("multinode: network namespaces need root")
    if LocalSlurm.multinode().running():
        pytest.skip("the multi-node cluster is up already (someone's `commstack slurm start --nodes N`), and "
                    "this test would restart it")
    clone = tmp_path / "clone"  # another checkout: its own lib/ and its own .venv's Python
    shutil.copytree(TOP / "lib", clone / "lib")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(clone / ".venv")], check=True)
    site = next((clone / ".venv" / "lib").glob("python3*/site-packages"))
    (site / "clone.pth").write_text(f"{clone / 'lib'}\n{sysconfig.get_paths()['purelib']}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "COMMSTACK_"))}
    try:
        started = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-m", "commstack", "slurm", "start",
                                  "--nodes", "2"], env=env, capture_output=True, text=True, timeout=300)
        assert started.returncode == 0, started.stdout + started.stderr
        cluster = LocalSlurm.multinode()
        assert str(clone / ".venv" / "bin" / "python") in (cluster.root / "etc" / "task-epilog").read_text()
        shutil.rmtree(clone)
        proc = subprocess.run([str(TOP / "bin" / "commstack"), "slurm", "start", "--nodes", "2"], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        srun = subprocess.run(["srun", "-N2", "hostname"], env={**env, "SLURM_CONF": str(cluster.conf)},
                              capture_output=True, text=True, timeout=120)
        assert srun.returncode == 0 and sorted(srun.stdout.split()) == ["node1", "node2"], srun.stdout + srun.stderr
        assert "task-epilog" not in srun.stderr and "No such file" not in srun.stderr, srun.stderr
        assert sys.executable in (cluster.root / "etc" / "task-epilog").read_text()
    finally:
        subprocess.run([str(TOP / "bin" / "commstack"), "slurm", "stop", "--nodes", "2"], env=env,
                       capture_output=True, timeout=300)
    assert not LocalSlurm.multinode().processes()
