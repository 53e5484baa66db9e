"""The lower layers' stack facts (fi_info's providers and cxi links, ucx_info -d's transports) as the
facts probe reports them, and the named failure when a node lacks what the system expects."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from commstack.run.facts import lower_layer_problem, parse_probe, probe_argv

FACTS = Path(__file__).resolve().parents[1] / "data" / "facts"
# the probe's filters (run/facts.py PROBE), applied here to the recorded and reproduced outputs
CXI_LINES = re.compile(r"^(fi_info:|    fi_domain_attr:|        name: .*|    fi_fabric_attr:|        prov_name: .*"
                       r"|    nic:.*|        fi_link_attr:|            (state|speed): .*)$")
UCX_LINES = re.compile(r"^# *(Memory domain|Transport|Device): ")


def probe_lines(host: str, section: str, path: str, keep: re.Pattern | None = None) -> str:
    lines = (FACTS / path).read_text().splitlines()
    return "".join(f"@@ 0 {host} {section} {line}\n" for line in lines if keep is None or keep.search(line))


def test_cxi_links_and_gpu_transports_from_the_probe():
    text = (probe_lines("nid1", "fi_cxi", "reproduced/fi_info-v-p-cxi-1.22.txt", CXI_LINES)
            + probe_lines("nid1", "ucx_info", "reproduced/ucx_info-d-1.19-gh200.txt", UCX_LINES)
            + "".join(f"@@ 0 nid1 fi_providers {p}:\n" for p in ("cxi", "shm", "tcp")))
    node = parse_probe(text)["nodes"]["nid1"]
    assert node["cxi_links"] == {"cxi0": "FI_LINK_UP", "cxi1": "FI_LINK_UP", "cxi2": "FI_LINK_DOWN",
                                 "cxi3": "FI_LINK_UP"}
    assert {"cuda_copy/cuda", "gdr_copy/cuda", "tcp/hsn0"} <= set(node["ucx_transports"])
    assert lower_layer_problem("fabric", "cxi", [], {"nid1": node}) == \
        "cxi link not up: cxi2 on nid1 (FI_LINK_DOWN)"
    assert lower_layer_problem("ucx", "cxi", ["cuda_copy", "gdr_copy"], {"nid1": node}) is None


def test_a_missing_provider_or_transport_is_named():
    text = (probe_lines("nid2", "fi_providers", "debian12/fi_info-l.txt", re.compile(r":$"))
            + probe_lines("nid2", "ucx_info", "debian12/ucx_info-d.txt", UCX_LINES))
    nodes = parse_probe(text)["nodes"]
    assert lower_layer_problem("fabric", "cxi", [], nodes) == (
        "provider cxi not found on nid2: libfabric built without cxi, or the cxi driver not loaded")
    assert lower_layer_problem("fabric", "tcp", [], nodes) is None
    assert lower_layer_problem("ucx", None, ["tcp", "gdr_copy"], nodes) == (
        "UCX transport gdr_copy not found on nid2: UCX built without GDRCopy (+gdrcopy), or the gdrdrv module not "
        "loaded")
    assert lower_layer_problem("mpi", "cxi", ["gdr_copy"], nodes) is None  # other layers are not held to them


@pytest.mark.skipif(not shutil.which("fi_info") or not shutil.which("ucx_info"),
                    reason="no fi_info / ucx_info (Debian: apt-get install libfabric-bin ucx-utils)")
def test_the_probe_here_lists_this_nodes_providers_and_transports():
    out = subprocess.run(probe_argv("/bin/sh"), capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "SLURM_PROCID": "0"}).stdout
    (node,) = parse_probe(out)["nodes"].values()
    assert {"tcp", "shm"} <= set(node["libfabric_providers"]) and node["cxi_links"] == {}
    assert "self/memory0" in node["ucx_transports"] and any(t.startswith("tcp/") for t in node["ucx_transports"])


def test_a_fabric_step_without_the_systems_provider_fails_whatever_its_figures():
    from commstack.config import load_suite, load_system
    from commstack.run.lifecycle import evaluate
    from commstack.run.steps import expand
    from commstack.tools import fi_pingpong
    alps = load_system("alps-gh200")
    s = next(s for s in expand(load_suite("stack"), alps) if s.benchmark == "fi_pingpong")
    text = (FACTS.parent / "fi_pingpong" / "1.17" / "pair-slurm-netns.client.stdout").read_text()
    nodes = parse_probe(probe_lines("nid1", "fi_providers", "debian12/fi_info-l.txt", re.compile(r":$")))["nodes"]
    record = evaluate(s, fi_pingpong.TOOL.parse(text), text, {"nodes": nodes}, alps, None)
    assert record.verdict == "fail"
    assert record.reason == "provider cxi not found on nid1: libfabric built without cxi, or the cxi driver not loaded"
    assert "stack: provider cxi not found" in record.detail and "fi_pingpong [bandwidth_MBps]" in record.detail
    assert s.step.argv[-1] == "{program} -p cxi -e rdm -S all -I 100 -P {port} {host}"  # the system's provider


def test_a_missing_tool_binary_says_how_to_get_it(monkeypatch):
    from commstack.errors import BinaryNotFoundError
    from commstack.tools import fi_pingpong, ucx_perftest
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(BinaryNotFoundError, match=r"fi_pingpong not found on PATH: on a workstation `apt-get install "
                                                  r"libfabric-bin` .*`spack env activate envs/gh200-ompi`"):
        fi_pingpong.TOOL.native(None)
    with pytest.raises(BinaryNotFoundError, match=r"ucx_perftest not found on PATH: on a workstation `apt-get install "
                                                  r"ucx-utils`"):
        ucx_perftest.TOOL.native(None)
    assert fi_pingpong.TOOL.planned(None) == "$FI_PINGPONG"


@pytest.mark.skipif(not shutil.which("fi_info"), reason="no fi_info (Debian: apt-get install libfabric-bin)")
def test_the_probe_records_the_provider_fi_info_picks_with_the_steps_fi_variables():
    """The probe as a step's placement launches it (launch.Launcher.program: what follows srun's `--`), its
    variables as arguments: fi_info runs with the FI_* ones, so the provider recorded is the benchmark's; the
    others (PATH here) still reach no program of the probe."""
    from commstack.config import load_system
    from commstack.run.launch import Launcher, Step
    from commstack.run.runner import probe_step
    launcher = Launcher(load_system("local"), slurm_variables={})
    picked = {}
    for provider in ("tcp", "sockets"):
        step = Step(name="osu_latency", argv=["/bin/sh"], variables={"FI_PROVIDER": provider, "PATH": "/nowhere"})
        argv = launcher.program(probe_step(step))
        out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=300,
                             env={"PATH": "/usr/bin:/bin", "SLURM_PROCID": "0"}).stdout
        facts = parse_probe(out)
        ((node, ), (rank, )) = facts["nodes"].values(), facts["ranks"]
        assert rank["nic_selection"]["FI_PROVIDER"] == provider
        assert {"tcp", "sockets"} <= set(node["libfabric_providers"])  # -l lists them all, whatever FI_PROVIDER
        picked[provider] = node["libfabric_provider"]
    assert picked == {"tcp": "tcp;ofi_rxm", "sockets": "sockets"}
