"""Fixtures shared by the tiers that start a local Slurm of their own (tests/slurm, tests/faults), and
COMMSTACK_REQUIRE_FAULTS=1 (CI): there a skipped fault test is a failure, so that the tier cannot pass
by skipping."""

import os

import pytest
from waits import wait_until

from commstack.errors import SlurmUnavailableError
from commstack.slurm.cluster import LocalSlurm
from commstack.slurm.config import free_ports


@pytest.fixture
def own_slurm(pytestconfig, tmp_path_factory):
    """A local Slurm of this test alone (its own directory, and ports chosen free now: a second test run
    beside this one gets others), beside any other cluster. Afterwards no job of it may be queued (a
    cancelled job is COMPLETING for a while), and once stopped no process of it may be left."""
    mode = pytestconfig.getoption("--slurm")
    if mode in ("off", "external"):
        pytest.skip(f"--slurm={mode}: this test starts a local Slurm of its own")
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm") / "s", *free_ports(2))
    try:
        cluster.start()
    except SlurmUnavailableError as e:
        pytest.skip(f"the local Slurm cannot start here: {e}")
    yield cluster
    try:
        if cluster.pid("slurmctld"):
            wait_until(lambda: not cluster.jobs(), "the queue empties", poll=0.5)
    finally:
        cluster.stop(force=True)
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
