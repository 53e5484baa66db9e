"""The tool modules keep the contract of commstack.tools: every benchmark's tool, metric and columns
agree with the registry, a tool names its layer and launch kind, and a `pair` tool, which the runner
does not launch yet, is not-run with the reason instead of being launched as MPI ranks."""

import dataclasses

import pytest

from commstack import benchmarks, tools
from commstack.config import load_system
from commstack.run.launch import Step
from commstack.run.runner import judged, launched_step, new_record
from commstack.run.steps import SuiteStep
from commstack.tools.base import LAUNCHES, LAYERS


def test_every_benchmark_belongs_to_a_registered_tool_that_prints_its_metric():
    assert list(tools.TOOLS) == ["osu", "nccl-tests", "mpi-pingpong"]
    for m in tools.MODULES:
        assert m.TOOL.layer in LAYERS and m.TOOL.launch in LAUNCHES
        for name, b in m.BENCHMARKS.items():
            assert b.tool is m.TOOL and benchmarks.get(name) is b
            assert b.metric in m.COLUMNS and m.COLUMNS[b.metric].higher_is_better is not None
    assert len(benchmarks.BENCHMARKS) == sum(len(m.BENCHMARKS) for m in tools.MODULES)


def test_a_tool_with_an_unknown_layer_or_launch_is_refused():
    osu = tools.get("osu")
    with pytest.raises(ValueError, match="layer 'transport'"):
        dataclasses.replace(osu, layer="transport")
    with pytest.raises(ValueError, match="launch 'ssh'"):
        dataclasses.replace(osu, launch="ssh")
    with pytest.raises(Exception, match="unknown tool 'fi_pingpong'; known: osu, nccl-tests, mpi-pingpong"):
        tools.get("fi_pingpong")


def test_a_pair_tool_is_not_run_with_the_reason_until_the_runner_launches_pairs(monkeypatch):
    bench = benchmarks.get("mpi-pingpong")
    pair = dataclasses.replace(bench, tool=dataclasses.replace(bench.tool, launch="pair"))
    monkeypatch.setitem(benchmarks.BENCHMARKS, "mpi-pingpong", pair)
    s = SuiteStep("pp-N2-n2", "mpi-pingpong", "mpi-pingpong", Step("pp", ["/bin/pp", "-m", "cpu"], nodes=2, ntasks=2),
                  tags={"suite": "t"})
    record = new_record("run", 0, s, load_system("local"))
    with judged(record):
        launched_step(s, s.step.argv)
    assert (record.verdict, record.error_kind) == ("not-run", "unsupported-launch")
    assert record.reason == ("mpi-pingpong: mpi-pingpong is launched as a pair (a server and a client), which this "
                             "runner does not launch yet")


def test_an_mpi_tool_is_launched_with_the_variables_it_needs():
    s = SuiteStep("ar-N1-n1", "all_reduce_perf", "nccl-tests", Step("ar", ["/x/all_reduce_perf"], ntasks=1),
                  tags={"suite": "t"})
    assert launched_step(s, ["/y/all_reduce_perf"]).variables == {"NCCL_DEBUG": "INFO"}
    assert launched_step(s, ["/y/all_reduce_perf"]).argv == ["/y/all_reduce_perf"]
