"""mpi-pingpong run for real as srun --mpi=pmix -n 2 job steps in the session's allocation."""

import math

import pytest
from waits import printed_in_time

from commstack.errors import BinaryNotFoundError, StepCrashedError, StepTimeoutError
from commstack.results.judge import check_correctness, judge
from commstack.run.launch import Step
from commstack.tools.mpi_pingpong import parse_pingpong

pytestmark = pytest.mark.slurm


def test_pingpong_cpu_two_ranks(launcher, pingpong_binary, step_dir):
    step = Step("mpi-pingpong-cpu", [str(pingpong_binary), "-m", "cpu", "-b", "8", "-e", "4M", "-n", "20"],
                ntasks=2, timeout_s=120)
    result = launcher.run(step, step_dir)
    sweep = parse_pingpong(result.stdout)
    verdict = judge([sweep], {"mode": "cpu"}, None, "bandwidth_GiBps")
    assert result.returncode == 0
    assert sweep.meta["mode"] == "cpu" and sweep.complete
    assert sweep.sizes == [8 << i for i in range(20)]  # 8 B .. 4 MiB
    assert all(r["check"] == "Pass" for r in sweep.rows) and check_correctness(sweep) == []
    assert all(math.isfinite(r["bandwidth_GiBps"]) and r["bandwidth_GiBps"] > 0 for r in sweep.rows)
    assert result.nodelist and (step_dir / "stdout.txt").read_text() == result.stdout
    assert verdict.verdict == "pass"


@pytest.mark.parametrize("ntasks", [1, 3])
def test_pingpong_wrong_rank_count_is_a_clear_error(launcher, pingpong_binary, step_dir, ntasks):
    step = Step(f"mpi-pingpong-{ntasks}", [str(pingpong_binary), "-e", "64"], ntasks=ntasks, timeout_s=60)
    with pytest.raises(StepCrashedError, match="exit status 2"):
        launcher.run(step, step_dir)
    assert f"needs exactly 2 MPI ranks, got {ntasks}" in (step_dir / "stderr.txt").read_text()


def test_cuda_mode_in_cpu_build_is_refused(launcher, pingpong_binary, step_dir):
    step = Step("mpi-pingpong-staged", [str(pingpong_binary), "-m", "staged"], ntasks=2, timeout_s=60)
    with pytest.raises(StepCrashedError):
        launcher.run(step, step_dir)
    assert "mode 'staged' needs a CUDA build" in (step_dir / "stderr.txt").read_text()


def test_missing_binary(launcher, step_dir):
    with pytest.raises(BinaryNotFoundError, match="no-such-benchmark"):
        launcher.run(Step("missing", ["/nonexistent/no-such-benchmark"], ntasks=2), step_dir)
    assert (step_dir / "command.txt").exists()


def test_step_timeout_cancels_the_step_and_keeps_output(launcher, pingpong_binary, step_dir):
    """An MPI step past its timeout is cancelled with the named error, the header it printed after MPI_Init
    kept, and the allocation still takes steps. Where MPI_Init on a loaded machine outlasts the timeout, the
    step runs again with a longer one (waits.printed_in_time)."""
    header = "mode=cpu ranks=2 loops=2000000000 warmup=5 min=8 max=8"

    def attempt(timeout_s: int) -> bool:
        step = Step("mpi-pingpong-slow", [str(pingpong_binary), "-b", "8", "-e", "8", "-n", "2000000000"],
                    ntasks=2, timeout_s=timeout_s)
        with pytest.raises(StepTimeoutError, match=f"timed out after {timeout_s} s"):
            launcher.run(step, step_dir / f"slow-{timeout_s}")
        kept = (step_dir / f"slow-{timeout_s}" / "stdout.txt").read_text()
        assert header in kept or kept == "", kept  # the header is the first thing it prints
        return header in kept
    printed_in_time(attempt, 30)
    # the allocation is still usable: the next step runs
    ok = launcher.run(Step("after-timeout", [str(pingpong_binary), "-e", "64", "-n", "2"], ntasks=2), step_dir / "next")
    assert parse_pingpong(ok.stdout).complete
