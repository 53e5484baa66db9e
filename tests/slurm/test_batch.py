"""Batch submission on the 3-node local cluster for real: a suite submitted with sbatch is judged
when the job ends, and a job cancelled in the middle of a step leaves that step and the ones after
it not-run. Needs root (network namespaces) and an OSU install (COMMSTACK_OSU_PREFIX)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from waits import namespace_cluster_alone, wait_until

from commstack.cli.main import main
from commstack.results.records import read_run
from commstack.run.batch import read_plan
from commstack.slurm.cluster import LocalSlurm

pytestmark = [pytest.mark.slurm, pytest.mark.multinode]
OSU = Path(os.environ.get("COMMSTACK_OSU_PREFIX") or "")
SUITE = """name: batchtest
steps:
- {benchmark: osu_latency, nodes: 2, ranks_per_node: 1, sizes: [8, 1024], args: [-i, 100, -x, 10]}
- {benchmark: osu_bw, nodes: 2, ranks_per_node: 1, sizes: [8, 65536], args: [-i, %s, -x, 5]}
- {benchmark: osu_allreduce, nodes: 3, ranks_per_node: 1, sizes: [8, 1024], args: [-i, 100, -x, 10]}
"""


@pytest.fixture(scope="module")
def cluster(pytestconfig):
    if os.geteuid() != 0:
        pytest.skip("multinode: network namespaces need root")
    if not os.environ.get("COMMSTACK_OSU_PREFIX"):
        pytest.skip("needs an OSU install: set COMMSTACK_OSU_PREFIX to its prefix (or bin/commstack test "
                    "--osu-prefix PREFIX)")
    if not (OSU / "libexec" / "osu-micro-benchmarks" / "mpi" / "pt2pt" / "osu_bw").is_file():
        pytest.skip(f"COMMSTACK_OSU_PREFIX={OSU} is not an OSU install (no libexec/.../pt2pt/osu_bw)")
    with namespace_cluster_alone(pytestconfig):
        c = LocalSlurm.multinode(3)
        c.start()
        yield c
        c.stop(manual=True)  # the lease `commstack suite --submit` took so that the cluster outlives it
        c.stop()


def suite(tmp_path: Path, bw_iterations: int) -> Path:
    path = tmp_path / "batchtest.yaml"
    path.write_text(SUITE % bw_iterations)
    return path


def test_submitted_suite_is_judged_when_the_job_ends(cluster, tmp_path, capsys):
    run = tmp_path / "run"
    rc = main(["suite", str(suite(tmp_path, 20)), "--system", "local-multinode", "--submit", "--wait",
               "--results", str(run), "--osu-prefix", str(OSU), "--slurm", "local"])
    out = capsys.readouterr().out
    assert "submitted batch job" in out and "COMPLETED" in out
    records = {r.benchmark: r for r in read_run(run)}
    assert rc == 0, out
    assert [r.verdict for r in records.values()] == ["pass"] * 3
    bw = records["osu_bw"]
    assert [row["size"] for row in bw.repeats[0]][-1] == 65536 and bw.repeats[0][-1]["bandwidth_MBps"] > 0
    assert bw.commands[0][0] == "srun" and len(bw.nodelist) == 2
    # facts from the compute nodes: every node of the step, every rank
    assert sorted(bw.stack["nodes"]) == bw.nodelist
    assert all(n["mpi_library"] == "Open MPI" for n in bw.stack["nodes"].values())
    assert len(records["osu_allreduce"].stack["ranks"]) == 3
    assert (run / "report" / "index.html").is_file()
    # polled again: collected once, same answer
    assert main(["status", str(run)]) == 0


def test_cancelled_job_leaves_the_rest_not_run(cluster, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["suite", str(suite(tmp_path, 10_000_000)), "--system", "local-multinode", "--submit",
                 "--results", str(run), "--osu-prefix", str(OSU), "--slurm", "local"]) == 0
    job = read_plan(run).job_id
    assert main(["status", str(run)]) == 4  # not ended yet

    def bw_printing() -> Path | None:
        """osu_bw's step directory once its first repeat writes output (its 10,000,000 iterations then run long)."""
        found = [d for d in run.glob("steps/batchtest--osu_bw-*") if (d / "repeat-0" / "stdout.txt").is_file()]
        return found[0] if found else None
    wait_until(bw_printing, "the job reaches osu_bw", alive=lambda: cluster.jobs())
    subprocess.run([shutil.which("scancel") or "scancel", job], env=cluster.variables, check=True)
    rc = main(["status", str(run), "--wait"])
    out = capsys.readouterr().out
    verdicts = {r.benchmark: r for r in read_run(run)}
    assert rc == 3, out  # what ran passed, the rest did not run
    assert verdicts["osu_latency"].verdict == "pass"
    assert verdicts["osu_bw"].verdict == "not-run"
    assert "the job ended (CANCELLED) while this step ran" in verdicts["osu_bw"].reason
    assert verdicts["osu_allreduce"].verdict == "not-run"
    assert verdicts["osu_allreduce"].reason == "the job ended (CANCELLED) before this step"
