"""Real GPU outputs recorded by tests/data/corpus/record-gpu.sh on a machine lent to a session (one NVIDIA H200,
driver 580.159.04): nccl-tests 2.17.1 built there with nvcc 13.0.88 against NCCL 2.28.9 (pip
nvidia-nccl-cu13), and mpi-pingpong's CUDA modes under that machine's Open MPI 4.1.6, read through
`bin/commstack parse` as a user types it: the figures the H200 printed, and that the data was checked.
Their indexed results (tests/data/corpus/index.d/nccl.yaml) are test_corpus's."""

from __future__ import annotations

import json
import subprocess

import pytest

from commstack.paths import TOP

NCCL = TOP / "tests" / "data" / "corpus" / "nccl-tests"
PINGPONG = TOP / "tests" / "data" / "mpi-pingpong"
ARGS = "-b 8 -e 128M -f 2 -g 1"
SIZES = [8 << k for k in range(25)]  # -b 8 -e 128M -f 2
#: the binaries that check only their out-of-place result (in-place #wrong N/A with -c 1)
OUT_OF_PLACE_ONLY = ("alltoall_perf", "sendrecv_perf")


def parse(path, args: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TOP / "bin" / "commstack"), "parse", str(path), f"--args={args}", *flags],
                          capture_output=True, text=True, timeout=120)


def table(path, args: str = ARGS) -> dict:
    """The one table of an output, read strictly (--strict: a step's rule)."""
    p = parse(path, args, "--strict", "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    [t] = json.loads(p.stdout)
    return t


def test_all_reduce_128_mib_on_the_h200_checked_its_data():
    t = table(NCCL / "all_reduce_perf-2.17.1-h200-c1.out")
    assert (t["benchmark"], t["verdict"], t["validated"], t["device"]) == ("all_reduce_perf", "complete", "yes",
                                                                           "CUDA")
    assert t["meta"]["validation"] == 1 and t["meta"]["out_of_bounds"] == 0
    assert [d["name"] for d in t["meta"]["devices"]] == ["NVIDIA H200"]
    last = t["rows"][-1]
    assert last["size"] == 128 << 20 and last["type"] == "float" and last["redop"] == "sum"
    # one rank: all_reduce's bus factor 2(n-1)/n is 0, so busbw 0.00 beside 2017 GB/s of algbw
    assert (last["oop_time_us"], last["oop_algbw_GBps"], last["oop_busbw_GBps"]) == (66.54, 2017.06, 0.0)
    assert all(r["oop_wrong"] == 0 and r["ip_wrong"] == 0 for r in t["rows"])  # #wrong 0, every size
    assert [n["line"] for n in t["notes"]] == ["NCCL version 2.28.9+cuda13.0"]


@pytest.mark.parametrize("bench", ["all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "broadcast_perf",
                                   "reduce_perf", "alltoall_perf", "sendrecv_perf", "hypercube_perf", "gather_perf",
                                   "scatter_perf"])
def test_every_binary_on_the_h200_is_complete_and_validated_strictly(bench):
    t = table(NCCL / f"{bench}-2.17.1-h200-c1.out")
    assert (t["benchmark"], t["verdict"], t["validated"]) == (bench, "complete", "yes")
    assert [r["size"] for r in t["rows"]][1:] == SIZES[1:]
    assert t["rows"][0]["size"] in (0, 8)  # 8 B rounds down to 0 where counts are aligned to 16 B
    assert all(r["oop_wrong"] == 0 for r in t["rows"])
    in_place = {r["ip_wrong"] for r in t["rows"]}
    assert in_place == ({None} if bench in OUT_OF_PLACE_ONLY else {0})


def test_broadcast_busbw_is_its_algbw():
    last = table(NCCL / "broadcast_perf-2.17.1-h200-c1.out")["rows"][-1]
    assert (last["size"], last["oop_algbw_GBps"], last["oop_busbw_GBps"], last["root"]) == (128 << 20, 2022.24,
                                                                                           2022.24, 0)


def test_c0_on_the_h200_is_complete_but_not_validated():
    t = table(NCCL / "all_reduce_perf-2.17.1-h200-c0.out", ARGS + " -c 0")
    assert (t["verdict"], t["validated"], t["meta"]["validation"]) == ("complete", "no", 0)
    assert {r["oop_wrong"] for r in t["rows"]} == {r["ip_wrong"] for r in t["rows"]} == {None}
    assert t["rows"][-1]["oop_algbw_GBps"] == 2031.04


def test_nccl_debug_info_lines_are_notes_and_say_which_network():
    t = table(NCCL / "all_reduce_perf-2.17.1-h200-nccl-debug-info.out")
    assert (t["verdict"], t["validated"], len(t["rows"])) == ("complete", "yes", 25)
    assert len(t["notes"]) == 95 and {n["what"] for n in t["notes"]} == {"NCCL_DEBUG line"}
    lines = [n["line"] for n in t["notes"]]
    assert "vm:1314:1314 [0] NCCL INFO NCCL version 2.28.9+cuda13.0" in lines
    assert "vm:1314:1314 [0] NCCL INFO Using network Socket" in lines


def test_mpi_pingpong_staged_on_the_h200():
    t = table(PINGPONG / "mpi-pingpong-h200-staged.out", "-m staged -e 4M -n 20")
    assert (t["benchmark"], t["verdict"], t["validated"], t["device"]) == ("mpi-pingpong", "complete", "yes", "CUDA")
    assert [r["size"] for r in t["rows"]] == [8 << k for k in range(20)]
    assert {r["check"] for r in t["rows"]} == {"Pass"} and t["rows"][-1]["bandwidth_GiBps"] == 2.587049625


def test_mpi_pingpong_cuda_aware_under_an_mpi_without_cuda_is_a_crash():
    """Debian's Open MPI 4.1.6 there is built without CUDA: the program refuses the mode before its header."""
    p = parse(PINGPONG / "mpi-pingpong-h200-cuda-aware.out", "-m cuda-aware -e 4M -n 20")
    assert p.returncode == 9 and "0 rows, crashed, validated: no" in p.stdout
    assert "crashed: the launcher says a rank exited with a non-zero status" in p.stderr
