"""The tool modules keep the contract of commstack.tools: every benchmark's tool, metric and columns
agree with the registry, a tool names its layer and launch kind, and a `pair` tool, which the runner
does not launch yet, is not-run with the reason instead of being launched as MPI ranks."""

import dataclasses

import pytest

from commstack import benchmarks, tools
from commstack.config import load_suite, load_system
from commstack.run.launch import Step
from commstack.run.pair import repeat_step
from commstack.run.lifecycle import launched_step
from commstack.run.steps import SuiteStep, expand
from commstack.tools.base import LAUNCHES, LAYERS


def test_every_benchmark_belongs_to_a_registered_tool_that_prints_its_metric():
    assert list(tools.TOOLS) == ["osu", "nccl-tests", "mpi-pingpong", "fi_pingpong", "ucx_perftest"]
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
    with pytest.raises(Exception, match="unknown tool 'ib_write_bw'; known: osu, nccl-tests, mpi-pingpong, "
                                        "fi_pingpong, ucx_perftest"):
        tools.get("ib_write_bw")


def test_a_pair_tool_runs_the_pair_launcher_with_each_repeats_rendezvous(tmp_path):
    steps = {s.benchmark: s for s in expand(load_suite("stack"), load_system("local-multinode"), {}, "host")}
    s = steps["fi_pingpong"]
    assert (s.step.nodes, s.step.ntasks, s.step.ntasks_per_node) == (2, 2, 1)
    step = repeat_step(launched_step(s, s.step.argv), tmp_path / "repeat-0")
    assert step.argv[1:7] == ["-m", "commstack.run.pair", str(tmp_path / "repeat-0" / "pair"),
                              str(s.step.timeout_s - 30), "--program", "$FI_PINGPONG"]
    assert step.argv[7:] == ["--server", "{program} -p tcp -e rdm -S all -I 100 -B {port}",
                             "--client", "{program} -p tcp -e rdm -S all -I 100 -P {port} {host}"]
    lat = steps["ucx_perftest-tag_lat"].step.argv
    assert lat[-1] == "{program} {host} -p {port} -t tag_lat -s 8 -n 10000" and lat[-3] == "{program} -p {port}"


def test_an_mpi_tool_is_launched_with_the_variables_it_needs():
    s = SuiteStep("ar-N1-n1", "all_reduce_perf", "nccl-tests", Step("ar", ["/x/all_reduce_perf"], ntasks=1),
                  tags={"suite": "t"})
    assert launched_step(s, ["/y/all_reduce_perf"]).variables == {"NCCL_DEBUG": "INFO"}
    assert launched_step(s, ["/y/all_reduce_perf"]).argv == ["/y/all_reduce_perf"]
