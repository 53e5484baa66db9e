"""Stack facts from the nodes a step runs on, and the judge's use of them: an NCCL step that did not
select the OFI net plugin on a system that needs it fails, whatever its bandwidth (seed 002)."""

import subprocess
from pathlib import Path

import pytest

from commstack.config import load_suite, load_system
from commstack.errors import ParseError
from commstack.results.references import load_references
from commstack.run.facts import parse_probe, probe_argv
from commstack.tools import nccl_tests
from commstack.tools.nccl_tests import nccl_net
from commstack.run.lifecycle import evaluate
from commstack.run.steps import expand

SEEDS = Path(__file__).resolve().parents[2] / "systems" / "references" / "seeds"
# the line aws-ofi-nccl prints under NCCL_DEBUG=INFO, once per rank, with NCCL's host:pid:tid prefix
OFI = "{host}:204199:204199 [0] NCCL INFO NET/OFI Selected Provider is cxi (found 4 nics)\n"
SOCKET = "{host}:155254:155254 [0] NCCL INFO Using network Socket\n"


@pytest.fixture(scope="module")
def alps():
    system = load_system("alps-gh200")
    steps = {s.step.environment: s for s in expand(load_suite("cscs-images"), system)
             if s.benchmark == "all_reduce_perf"}
    return system, load_references(system.references), steps


def judged(alps, environment: str, seed: str, extra: str = ""):
    system, refs, steps = alps
    s = steps[environment]
    text = (SEEDS / seed).read_text()
    return evaluate(s, nccl_tests.parse(text), text + extra, {}, system, refs)


def test_nccl_with_the_ofi_plugin_selected_on_every_node_passes(alps):
    r = judged(alps, "nccl-tests", "cscs-nccl-01.txt", OFI.format(host="nid005471") + OFI.format(host="nid005487"))
    assert r.verdict == "pass", r.reason
    assert dict(r.stack)["nccl_net"]["nid005487"]["ofi_provider"] == "cxi"


def test_nccl_without_the_plugin_fails_whatever_its_bandwidth(alps):
    r = judged(alps, "nccl-tests", "cscs-nccl-01.txt")  # seed 002's 122 GB/s run, but no plugin line
    assert r.verdict == "fail"
    assert "did not select the OFI net plugin" in r.reason and "whatever its bandwidth" in r.reason
    assert "all_reduce_perf [oop_busbw_GBps]: pass" in r.detail  # the figures alone were fine


def test_one_node_on_sockets_is_named(alps):
    r = judged(alps, "nccl-tests", "cscs-nccl-01.txt", OFI.format(host="nid005471") + SOCKET.format(host="nid005487"))
    assert r.verdict == "fail"
    assert "on nid005487 (network: Socket)" in r.reason


def test_a_run_without_the_hook_on_purpose_is_not_held_to_the_plugin(alps):
    r = judged(alps, "nccl-tests-no-awsofinccl", "cscs-nccl-02.txt")
    assert "OFI net plugin" not in r.reason
    assert r.verdict == "no-reference" and "aws-ofi-nccl plugin is not loaded" in r.detail


def test_a_system_without_the_plugin_requirement_ignores_it(alps):
    system, refs, steps = alps
    other = system.model_copy(update={"nccl_net_plugin": None})
    s = steps["nccl-tests"]
    text = (SEEDS / "cscs-nccl-01.txt").read_text()
    outcome = evaluate(s, nccl_tests.parse(text), text, {}, other, refs)
    assert outcome.verdict == "pass" and dict(outcome.stack)["nccl_net"] == {}


def test_nccl_net_reads_hosts_from_the_prefix():
    text = OFI.format(host="nid1") + SOCKET.format(host="nid2") + SOCKET.format(host="nid2")
    assert nccl_net(text) == {"nid1": {"ofi_provider": "cxi", "network": []},
                              "nid2": {"ofi_provider": None, "network": ["Socket"]}}


def test_the_probe_run_here_reports_this_node(tmp_path):
    out = subprocess.run(probe_argv("/bin/sh"), capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "SLURM_PROCID": "3", "SLURM_LOCALID": "0",
                              "CUDA_VISIBLE_DEVICES": "0", "FI_PROVIDER": "tcp"}).stdout
    facts = parse_probe(out)
    host = subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip()
    assert list(facts["nodes"]) == [host]
    assert facts["nodes"][host]["libmpi"] is None and "lo" not in facts["nodes"][host]["nics"]
    variables = {"SLURM_LOCALID": "0", "CUDA_VISIBLE_DEVICES": "0", "FI_PROVIDER": "tcp"}
    assert facts["ranks"] == [{"rank": 3, "host": host, "variables": variables, "gpu": None,
                               "nic_selection": {"FI_PROVIDER": "tcp"}}]


def test_a_line_that_is_not_the_probes_is_an_error():
    with pytest.raises(ParseError, match="not a commstack probe line.*'Welcome to the container'"):
        parse_probe("@@ 0 nid1 nics hsn0\nWelcome to the container\n")
