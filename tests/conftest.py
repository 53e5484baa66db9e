"""Fixtures shared by the tiers that start a local Slurm of their own (tests/slurm, tests/faults), and
COMMSTACK_REQUIRE_FAULTS=1 (CI): there a skipped fault test is a failure, so that the tier cannot pass
by skipping."""

import os
import time

import pytest

from commstack.errors import SlurmUnavailableError
from commstack.slurm.cluster import LocalSlurm


@pytest.fixture
def own_slurm(pytestconfig, tmp_path_factory):
    """A local Slurm of this test alone (its own directory and ports), beside any other cluster.
    Afterwards no job of it may be queued, and once stopped no process of it may be left."""
    mode = pytestconfig.getoption("--slurm")
    if mode in ("off", "external"):
        pytest.skip(f"--slurm={mode}: this test starts a local Slurm of its own")
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm") / "s", 16837, 16838)
    try:
        cluster.start()
    except SlurmUnavailableError as e:
        pytest.skip(f"the local Slurm cannot start here: {e}")
    yield cluster
    queued = cluster.jobs() if cluster.pid("slurmctld") else []
    for _ in range(30):  # a cancelled job is COMPLETING for a few seconds
        if not queued:
            break
        time.sleep(0.5)
        queued = cluster.jobs()
    cluster.stop(force=True)
    assert not queued, f"jobs left in the queue: {queued}"
    assert not cluster.processes(), f"processes of the cluster left: {cluster.processes()}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.skipped and item.get_closest_marker("faults") and os.environ.get("COMMSTACK_REQUIRE_FAULTS") == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = f"COMMSTACK_REQUIRE_FAULTS=1: the faults tier may not skip here: {reason}"
    return report
