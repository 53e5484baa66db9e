"""pytest plugin: command-line options, the Slurm cluster and allocation fixtures, per-test records.

Loaded by pytest.ini (-p commstack.pytest_plugin). Every test that runs a step gets a directory under
--results with the raw output, and a JSON record written atomically when it ends, whatever
the outcome; the session ends with summary.md.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from commstack.paths import TOP
from commstack.errors import SlurmUnavailableError
from commstack.files import write_atomic, write_json
from commstack.run.launch import Allocation, Launcher
from commstack.slurm import LocalSlurm
from commstack.spack.envs import stage
from commstack.spack import Spack, find_spack
from commstack.results.judge import load_references
from commstack.results.report import write_report
from commstack.config import load_system



def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("commstack")
    g.addoption("--system", default="local", help="system file name under systems/ (default: local)")
    g.addoption("--slurm", choices=("auto", "local", "external", "off"), default="auto",
                help="auto: use a reachable cluster, else start the local one; local: always the local one; "
                     "external: only a reachable cluster; off: skip the slurm tier")
    g.addoption("--launcher", choices=("srun", "mpirun"), default="srun",
                help="mpirun runs on this host without Slurm; only when asked for")
    g.addoption("--results", default=None, help="results directory (default: results/<date-time>)")
    g.addoption("--suite", default=None,
                help="benchmark suite under suites/ to run in the slurm tier (default: smoke on system local)")
    g.addoption("--memory", choices=("host", "device"), default=None,
                help="run only the suite's steps in this memory (a scaled-down suite on a system without GPUs)")
    g.addoption("--native-only", action="store_true", help="drop a suite's container runs")
    g.addoption("--osu-prefix", default=os.environ.get("COMMSTACK_OSU_PREFIX"),
                help="OSU install prefix (has libexec/osu-micro-benchmarks/mpi); default $COMMSTACK_OSU_PREFIX, "
                     "else the local Spack env's osu-micro-benchmarks when installed")
    g.addoption("--pingpong", default=None,
                help="mpi-pingpong binary (default: spack install in the local env, else make in src/mpi-pingpong)")


def pytest_configure(config: pytest.Config) -> None:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    root = Path(config.getoption("--results") or TOP / "results" / stamp)
    config.stash[RESULTS] = root
    config.stash[RECORDS] = []


RESULTS = pytest.StashKey[Path]()
RECORDS = pytest.StashKey[list]()


@pytest.fixture(scope="session")
def results_dir(pytestconfig: pytest.Config) -> Path:
    root = pytestconfig.stash[RESULTS]
    root.mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture(scope="session")
def system(pytestconfig: pytest.Config):
    return load_system(pytestconfig.getoption("--system"))


def _reachable_slurm() -> bool:
    if not shutil.which("sinfo"):
        return False
    return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=20).returncode == 0


@pytest.fixture(scope="session")
def slurm_env(pytestconfig: pytest.Config, system):
    """Environment for Slurm clients: a reachable cluster, else the local one we start and stop."""
    mode = pytestconfig.getoption("--slurm")
    if pytestconfig.getoption("--launcher") == "mpirun" or mode == "off":
        pytest.skip(f"slurm tier off (--slurm={mode}, --launcher={pytestconfig.getoption('--launcher')})")
    if mode in ("auto", "external") and _reachable_slurm():
        yield dict(os.environ)
        return
    if mode == "external":
        pytest.fail("--slurm=external but no Slurm cluster answers sinfo")
    # system local-multinode: the namespaced N-node cluster; any other: the single-node one
    cluster = LocalSlurm.multinode(system.nodes) if system.name == "local-multinode" else LocalSlurm()
    started = not cluster.running()
    try:
        cluster.start()
    except SlurmUnavailableError as e:
        pytest.skip(f"no Slurm here and the local one cannot start: {e}")
    try:
        yield cluster.env
    finally:
        if started:
            cluster.stop()


@pytest.fixture(scope="session")
def allocation(request, system, slurm_env):
    """One allocation for the whole session; every step runs in it. Released on any exit."""
    steps = [item.callspec.params["suite_step"].step for item in request.session.items
             if hasattr(item, "callspec") and "suite_step" in item.callspec.params]
    nodes = max([min(system.nodes, 2)] + [st.nodes for st in steps])  # as large as the largest step
    ntasks = max([2 * nodes] + [st.ntasks for st in steps])
    with Allocation(system, slurm_env, nodes=nodes, ntasks=ntasks) as alloc:
        yield alloc


@pytest.fixture(scope="session")
def launcher(pytestconfig: pytest.Config, system, request) -> Launcher:
    if pytestconfig.getoption("--launcher") == "mpirun":
        return Launcher(system, "mpirun")
    alloc = request.getfixturevalue("allocation")
    return Launcher(system, "srun", slurm_env=request.getfixturevalue("slurm_env"), allocation=alloc)


@pytest.fixture(scope="session")
def local_env(results_dir: Path, tmp_path_factory) -> tuple[Spack, Path] | None:
    """Spack and a staged copy of the local env, where Spack is; None elsewhere."""
    exe = find_spack()
    if exe is None:
        return None
    return Spack(exe, results_dir / "spack-logs"), stage(tmp_path_factory.mktemp("local-env"))


@pytest.fixture(scope="session")
def pingpong_binary(pytestconfig: pytest.Config, results_dir: Path, request) -> Path:
    """mpi-pingpong: the given binary, else built by Spack (local env) where Spack is, else by make."""
    given = pytestconfig.getoption("--pingpong")
    if given:
        path = Path(given)
        if not path.is_file():
            pytest.fail(f"--pingpong {given}: no such file")
        return path
    local = request.getfixturevalue("local_env")
    if local:
        spack, staged = local
        spack("install", "--fail-fast", "mpi-pingpong", env_dir=staged, timeout=1800)
        prefix = spack("location", "-i", "mpi-pingpong", env_dir=staged).stdout.strip()
        return Path(prefix) / "bin" / "mpi-pingpong"
    if not shutil.which("mpicc"):
        pytest.skip("no mpicc on PATH to build mpi-pingpong (install libopenmpi-dev: ci/install-deps.sh)")
    build = results_dir / "build" / "mpi-pingpong"
    build.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["make", "-C", str(TOP / "src" / "mpi-pingpong"), "-B", f"OUT={build / 'mpi-pingpong'}"],
                          capture_output=True, text=True)
    write_atomic(build / "build.log", proc.stdout + proc.stderr)
    if proc.returncode != 0:
        pytest.fail(f"building mpi-pingpong failed:\n{proc.stderr}")
    return build / "mpi-pingpong"


@pytest.fixture(scope="session")
def osu_dir(pytestconfig: pytest.Config, request) -> Path:
    """libexec/osu-micro-benchmarks/mpi of the given prefix, else of the local env's OSU install."""
    prefix = pytestconfig.getoption("--osu-prefix")
    local = None if prefix else request.getfixturevalue("local_env")
    if local:
        spack, staged = local
        proc = spack("location", "-i", "osu-micro-benchmarks", env_dir=staged, check=False)
        prefix = proc.stdout.strip() if proc.returncode == 0 else None
    if not prefix:
        pytest.skip("no OSU micro-benchmarks: pass --osu-prefix or set COMMSTACK_OSU_PREFIX "
                    "(or spack install osu-micro-benchmarks in the local env)")
    mpi = Path(prefix) / "libexec" / "osu-micro-benchmarks" / "mpi"
    if not (mpi / "pt2pt" / "osu_latency").is_file():
        pytest.fail(f"--osu-prefix {prefix}: no {mpi}/pt2pt/osu_latency")
    return mpi


@pytest.fixture
def step_dir(request, results_dir: Path) -> Path:
    name = request.node.nodeid.replace("/", ".").replace("::", "--")
    d = results_dir / "steps" / "".join(c if c.isalnum() or c in "._-[]" else "_" for c in name)
    d.mkdir(parents=True, exist_ok=True)
    request.node.stash[STEP_DIR] = d
    return d


@pytest.fixture
def record(request) -> dict:
    """What a test wants kept with its result (parsed rows, verdict, stack facts)."""
    data: dict = {}
    request.node.stash[RECORD] = data
    return data


PROGRESS = pytest.StashKey[dict]()
STEP_DIR = pytest.StashKey[Path]()
RECORD = pytest.StashKey[dict]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    rep = yield
    if rep.when == "call" or (rep.when == "setup" and rep.outcome != "passed"):
        d = item.stash.get(STEP_DIR, None)
        if d is not None:
            rec = {"test": item.nodeid, "outcome": rep.outcome, "duration_s": rep.duration,
                   "longrepr": str(rep.longrepr) if rep.failed else None, **item.stash.get(RECORD, {})}
            write_json(d / "record.json", rec)
            item.config.stash[RECORDS].append(rec)
    return rep


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[PROGRESS] = {"total": sum("suite_step" in getattr(i, "fixturenames", ()) for i in session.items),
                                      "done": [], "start": None}


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A suite shows which step runs, how many are left, and an estimate of the time left."""
    if "suite_step" not in getattr(item, "fixturenames", ()):
        return
    prog = item.config.stash[PROGRESS]
    done = prog["done"]
    left = prog["total"] - len(done)
    eta = f", about {statistics.mean(done) * left:.0f} s left" if done else ""
    tr = item.config.pluginmanager.get_plugin("terminalreporter")
    if tr:
        tr.write_line(f"[suite {len(done) + 1}/{prog['total']}] {item.callspec.id}{eta}")
    prog["start"] = time.monotonic()


def pytest_runtest_teardown(item: pytest.Item) -> None:
    prog = item.config.stash.get(PROGRESS, None)
    if prog and prog["start"] is not None and "suite_step" in getattr(item, "fixturenames", ()):
        prog["done"].append(time.monotonic() - prog["start"])
        prog["start"] = None


def pytest_sessionfinish(session: pytest.Session) -> None:
    records = session.config.stash[RECORDS]
    if not records:
        return
    root = session.config.stash[RESULTS]
    if any(r.get("suite") and r.get("repeats") for r in records):
        system = load_system(session.config.getoption("--system"))
        refs = load_references(system.references) if system.references else None
        report = write_report(root, refs)
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr:
            tr.write_line(f"commstack: report {report}")
    lines = ["# commstack test session", "", f"results: `{root}`", "",
             "| test | outcome | verdict | duration (s) |", "|---|---|---|---:|"]
    for r in records:
        lines.append(f"| `{r['test']}` | {r['outcome']} | {r.get('verdict', '')} | {r['duration_s']:.2f} |")
    write_atomic(root / "summary.md", "\n".join(lines) + "\n")


def pytest_report_header(config: pytest.Config) -> list[str]:
    spack = find_spack()
    return [f"commstack: system={config.getoption('--system')} slurm={config.getoption('--slurm')} "
            f"results={config.stash[RESULTS]}",
            f"commstack: spack tier {'enabled: ' + str(spack) if spack else 'SKIPPED: no Spack on PATH or SPACK_ROOT'}"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if find_spack() is None:
        skip = pytest.mark.skip(reason="spack tier: no Spack found (set SPACK_ROOT or run bin/commstack setup)")
        for item in items:
            if "spack" in item.keywords:
                item.add_marker(skip)
