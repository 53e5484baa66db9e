"""The chosen suite (--suite; smoke on system local), each step run for real through the harness.

Steps are expanded at collection from tests/suites/<suite>.yaml for --system; a suite the system
cannot hold is refused there, before anything is submitted.
"""

import dataclasses
import math

import pytest

from commstack.run.facts import mpi_facts, nccl_net, node_facts
from commstack.results.judge import check_correctness, judge, load_references
from commstack.results.parse import parse_nccl, parse_osu, parse_pingpong
from commstack.run.steps import expand, load_suite
from commstack.config import load_system

pytestmark = pytest.mark.slurm


def chosen_suite(config):
    name = config.getoption("--suite")
    if name is None and config.getoption("--system") == "local":
        name = "smoke"
    return name


def pytest_generate_tests(metafunc):
    if "suite_step" not in metafunc.fixturenames:
        return
    name = chosen_suite(metafunc.config)
    system = load_system(metafunc.config.getoption("--system"))
    steps = expand(load_suite(name), system, memory_only=metafunc.config.getoption("--memory"),
                   native_only=metafunc.config.getoption("--native-only")) if name else []
    metafunc.parametrize("suite_step", steps, ids=[s.id for s in steps])


def parse(tool: str, text: str):
    if tool == "osu":
        sweeps = parse_osu(text)
        assert len(sweeps) == 1, f"expected one OSU table, got {len(sweeps)}"
        return sweeps[0]
    return parse_nccl(text) if tool == "nccl-tests" else parse_pingpong(text)


def resolve(arg: str, binaries: dict[str, str]) -> str:
    """`$OSU_MPI/pt2pt/osu_bw` -> the real path; other arguments unchanged."""
    head, sep, rest = arg.partition("/")
    return binaries.get(head, head) + sep + rest


@pytest.fixture
def binaries(request, suite_step):
    """Native binaries this step needs; only those are looked up (a missing one skips the step)."""
    if suite_step.step.environment:
        return {}
    if suite_step.tool == "osu":
        return {"$OSU_MPI": str(request.getfixturevalue("osu_dir"))}
    if suite_step.tool == "mpi-pingpong":
        return {"$PINGPONG": str(request.getfixturevalue("pingpong_binary"))}
    pytest.skip("nccl-tests: no native nccl-tests on this system")


def test_step(suite_step, binaries, launcher, system, step_dir, record):
    argv = [resolve(a, binaries) for a in suite_step.step.argv]
    env = {"NCCL_DEBUG": "INFO"} if suite_step.tool == "nccl-tests" else {}  # the net plugin NCCL picks
    step = dataclasses.replace(suite_step.step, argv=argv, env={**suite_step.step.env, **env})
    refs = load_references(system.references) if system.references else None
    sweeps, commands = [], []
    for r in range(suite_step.repeats):
        result = launcher.run(step, step_dir / f"repeat-{r}")
        commands.append(result.command)
        sweeps.append(parse(suite_step.tool, result.stdout))
    verdict = judge(sweeps, suite_step.tags, refs, suite_step.metric, system.nic_line_rate_MBps)
    record.update(suite=suite_step.tags["suite"], step=suite_step.id, system=system.name, tags=suite_step.tags,
                  tool=suite_step.tool, benchmark=suite_step.benchmark, metric=suite_step.metric,
                  title=sweeps[0].title, version=sweeps[0].version, commands=commands,
                  nodelist=result.nodelist, repeats=[s.rows for s in sweeps], verdict=verdict.status,
                  verdict_detail=verdict.summary(),
                  stack={**(mpi_facts(argv[0]) if not step.environment else {}), **node_facts(),
                         "gpu_binding": system.gpu_binding,
                         "nccl_net": nccl_net(result.stdout + result.stderr) if suite_step.tool == "nccl-tests" else None})
    for s in sweeps:
        assert s.complete is not False, f"{suite_step.id}: the sweep stopped early"
        assert check_correctness(s) == [], check_correctness(s)
        assert s.rows and all(math.isfinite(v) and v > 0 for v in s.column(suite_step.metric))
    assert verdict.status == "pass", verdict.summary()
