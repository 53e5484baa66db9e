"""System files and the exact srun/mpirun lines built from them."""

import pytest

from commstack.errors import ConfigError
from commstack.run.launch import Allocation, Launcher, Step
from commstack.config import load_system, names_in
from commstack.paths import SYSTEMS
from commstack.slurm.procs import REAPER


def test_provided_systems():
    assert {"local", "alps-gh200", "cray-ex-gpu"} <= set(names_in(SYSTEMS))
    alps = load_system("alps-gh200")
    assert (alps.node.gpus, alps.node.nics, alps.node.nic_line_rate_MBps, alps.launcher.mpi) == (4, 4, 25000, "pmix")
    assert load_system("cray-ex-gpu").launcher.mpi == "cray_shasta"


def test_unknown_system_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown system 'daint'.*alps-gh200"):
        load_system("daint")


def test_alps_srun_line_matches_seed_000():
    alps = load_system("alps-gh200")
    alloc = Allocation(alps, {}, nodes=2, ntasks=8)
    alloc.job_id = "4242"
    step = Step("osu_alltoall", ["./collective/osu_alltoall", "--validation", "-d", "cuda"], nodes=2,
                ntasks_per_node=4, timeout_s=300, environment="omb-ompi", gpus=True)
    assert Launcher(alps, "srun", {}, alloc).command(step) == [
        "srun", "--jobid=4242", "--mpi=pmix", "-N2", "--ntasks-per-node=4", "-t5", "--kill-on-bad-exit=1",
        "--environment=omb-ompi", "--",
        "bash", "-c", 'export CUDA_VISIBLE_DEVICES=$SLURM_LOCALID; exec "$@"', "commstack-gpu",
        "env", "PMIX_MCA_psec=native", "./collective/osu_alltoall", "--validation", "-d", "cuda"]


def test_cray_line_uses_cray_shasta_and_gpus_per_task():
    cray = load_system("cray-ex-gpu")
    step = Step("bw", ["osu_bw", "-d", "cuda", "D", "D"], nodes=2, ntasks=2, timeout_s=60, gpus=True)
    assert Launcher(cray, "srun").command(step) == [
        "srun", "--mpi=cray_shasta", "-N2", "-n2", "-t1", "--kill-on-bad-exit=1", "--gpus-per-task=1", "--", *REAPER,
        "env", "MPICH_GPU_SUPPORT_ENABLED=1", "osu_bw", "-d", "cuda", "D", "D"]


def test_mpirun_only_when_asked():
    local = load_system("local")
    assert Launcher(local, "mpirun").command(Step("pp", ["pp"], ntasks=2)) == [
        "mpirun", "-np", "2", "--oversubscribe", *REAPER, "pp"]


@pytest.mark.parametrize("name", ["alps-gh200", "cray-ex-gpu", "local-multinode"])
def test_a_batch_job_reads_the_benchmark_back_from_its_srun_line(name):
    """issue 32 items 5, 13, 15: after srun's `--` come the GPU wrapper, the reaper and the variables' `env`;
    `commstack status` judges a batch step with the benchmark's own arguments, not ours (`-m commstack.slurm`
    is no OSU message size)."""
    from commstack.run.batch import benchmark_argv
    argv = ["/x/osu_bw", "-m", "8:8", "--", "-x"]
    for gpus in (False, True):
        command = Launcher(load_system(name), "srun").command(Step("bw", argv, nodes=2, ntasks=2, gpus=gpus))
        assert benchmark_argv(command) == argv and command[command.index("--") + 1:] != argv
