"""Fixtures shared by the tiers that start a local Slurm of their own (tests/slurm, tests/faults), and
COMMSTACK_REQUIRE_FAULTS=1 (CI): there a skipped fault test is a failure, so that the tier cannot pass
by skipping."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from waits import queue_empties

from commstack.errors import SlurmUnavailableError
from commstack.slurm.cluster import LocalSlurm
from commstack.slurm.config import free_ports

SESSION_SLURM = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """The local Slurm this session's steps share (slurm_variables, bin/commstack run in tests): in a directory
    of this session, unless COMMSTACK_SLURM_DIR names one. A second test run beside this one has its own, and
    neither waits for an allocation behind the other's jobs (`salloc ... got no allocation within 120 s`)."""
    if "COMMSTACK_SLURM_DIR" not in os.environ and not hasattr(config, "workerinput"):
        config.stash[SESSION_SLURM] = Path(tempfile.mkdtemp(prefix="commstack-tests-"))  # 0700, unpredictable
        os.environ["COMMSTACK_SLURM_DIR"] = str(config.stash[SESSION_SLURM] / "slurm")


def pytest_unconfigure(config: pytest.Config) -> None:
    root = config.stash.get(SESSION_SLURM, None)
    if root and not LocalSlurm(root / "slurm").processes():  # the session's run stopped it as its last user
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def own_slurm(pytestconfig, tmp_path_factory):
    """A local Slurm of this test alone (its own directory, and ports chosen free now: a second test run
    beside this one gets others), beside any other cluster. Afterwards no job of it may be queued but a
    COMPLETING one (a cancelled job is, for a while), and once stopped no process of it may be left."""
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
            queue_empties(cluster)
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
