"""Fixtures shared by the tiers that start a local Slurm of their own (tests/slurm, tests/faults), and
COMMSTACK_REQUIRE_FAULTS=1 and COMMSTACK_REQUIRE_SPACK=1 (CI): there a skipped fault test, or a spack test
skipped for want of Spack, is a failure, so that the tier cannot pass by skipping."""

import os
import shutil
import signal
from pathlib import Path

import pytest
from waits import queue_empties

from commstack.errors import SlurmUnavailableError
from commstack.spack import NO_SPACK
from commstack.slurm.cluster import LocalSlurm
from commstack.slurm.config import free_ports

SESSION_SLURM = pytest.StashKey[Path]()
#: the tiers whose tests run steps on the session's local Slurm (faults tests are marked slurm too)
SLURM_MARKERS = ("slurm", "multinode")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Ctrl-C, SIGTERM, SIGHUP and SIGQUIT (a cancelled CI job, a timeout, a closed terminal) stop the session as
    Ctrl-C does, SIGINT even where it came ignored (a CI script's background job): pytest tears its fixtures down,
    and the local Slurm clusters they started stop. Later ones are held off until that is done."""
    stopping = []

    def interrupt(signum: int, _frame: object) -> None:
        if not stopping:
            stopping.append(signum)
            raise KeyboardInterrupt(signal.Signals(signum).name)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, interrupt)


@pytest.fixture(scope="session", autouse=True)
def session_slurm(request, tmp_path_factory) -> None:
    """The local Slurm this session's steps share (slurm_variables, bin/commstack run in tests): in a directory
    of this session under pytest's basetemp (0700, pruned by pytest like any), unless COMMSTACK_SLURM_DIR names
    one. A second test run beside this one has its own, and neither waits for an allocation behind the other's
    jobs (`salloc ... got no allocation within 120 s`). Made when a session that runs a Slurm test starts its
    first test (before the session's fixtures that start Slurm): a unit run or --collect-only makes none."""
    if "COMMSTACK_SLURM_DIR" in os.environ:
        return
    if not any(item.get_closest_marker(m) for item in request.session.items for m in SLURM_MARKERS):
        return
    root = request.config.stash[SESSION_SLURM] = tmp_path_factory.mktemp("session-slurm")
    os.environ["COMMSTACK_SLURM_DIR"] = str(root / "slurm")


def pytest_unconfigure(config: pytest.Config) -> None:
    """The session's local Slurm stopped, whoever still holds a lease on it (a test that failed before
    giving its own back), and its directory removed."""
    root = config.stash.get(SESSION_SLURM, None)
    if root is None:
        return
    os.environ.pop("COMMSTACK_SLURM_DIR", None)
    try:
        if (root / "slurm").exists():
            LocalSlurm(root / "slurm").stop(force=True)
    finally:
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
    if not report.skipped:
        return report
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    if item.get_closest_marker("faults") and os.environ.get("COMMSTACK_REQUIRE_FAULTS") == "1":
        report.outcome = "failed"
        report.longrepr = f"COMMSTACK_REQUIRE_FAULTS=1: the faults tier may not skip here: {reason}"
    elif item.get_closest_marker("spack") and NO_SPACK in reason and os.environ.get("COMMSTACK_REQUIRE_SPACK") == "1":
        report.outcome = "failed"
        report.longrepr = f"COMMSTACK_REQUIRE_SPACK=1: the spack tier may not skip for want of Spack here: {reason}"
    return report
