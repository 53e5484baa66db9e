"""Real GPU outputs recorded on machines lent to a session (one NVIDIA H200, driver 580.159.04), read through
`bin/commstack parse` as a user types it: the figures the H200 printed, and that the data was checked.
- tests/data/corpus/record-gpu.sh: nccl-tests 2.17.1 built there with nvcc 13.0.88 against NCCL 2.28.9 (pip
  nvidia-nccl-cu13), and mpi-pingpong's CUDA modes under that machine's Open MPI 4.1.6 (not CUDA-aware).
- tests/data/corpus/record-gpu-stack.sh: this repository's own CUDA-aware stack (envs/x86-ompi: Open MPI 5.0.8,
  UCX 1.19.0, OSU 7.5.1, mpi-pingpong, as Spack built them here), 2 ranks on the one GPU; what ompi_info and
  ucx_info said there (tests/data/stack/h200/).
Their indexed results (tests/data/corpus/index.d/nccl.yaml, osu.yaml) are test_corpus's."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from commstack import exits
from commstack.paths import TOP

NCCL = TOP / "tests" / "data" / "corpus" / "nccl-tests"
PINGPONG = TOP / "tests" / "data" / "mpi-pingpong"
OSU7 = TOP / "tests" / "data" / "corpus" / "osu7"
STACK = TOP / "tests" / "data" / "stack" / "h200"
OSU_SIZES = [1 << k for k in range(23)]  # OSU 7.5.1's default sweep, 1 B to 4 MiB
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
    assert p.returncode == exits.CRASHED and "0 rows, crashed, validated: no" in p.stdout
    assert "crashed: the launcher says a rank exited with a non-zero status" in p.stderr


def test_the_stack_s_open_mpi_says_it_is_cuda_aware_on_the_h200():
    lines = (STACK / "ompi_info-cuda.out").read_text().splitlines()
    assert "mca:mpi:base:param:mpi_built_with_cuda_support:value:true" in lines
    assert "mca:opal:base:param:opal_cuda_support:value:true" in lines
    assert {'mca:accelerator:cuda:version:"component:5.0.8"', 'mca:btl:smcuda:version:"component:5.0.8"'} <= set(lines)


def test_the_stack_s_ucx_sees_the_gpu_through_cuda_copy_and_cuda_ipc_but_not_gdr_copy():
    """UCX 1.19.0 was built +gdrcopy, but its gdr_copy transport needs the gdrdrv kernel module: none there."""
    assert "# Library version: 1.19.0" in (STACK / "ucx_info-v.out").read_text().splitlines()
    assert "--with-gdrcopy=" in (STACK / "ucx_info-v.out").read_text()
    devices = re.findall(r"^#\s+Transport: (\S+)\n#\s+Device: (\S+)$", (STACK / "ucx_info-d.out").read_text(), re.M)
    assert [d for d in devices if d[1] == "cuda"] == [("cuda_copy", "cuda"), ("cuda_ipc", "cuda")]
    assert "gdr_copy" not in dict(devices)
    assert "no gdrdrv or nvidia_peermem kernel module" in (STACK / "record-1.log").read_text()


def test_the_default_pml_for_device_buffers_on_one_node_is_ob1():
    """UCX's PML finds no network device, only transports: priority 19 under ob1's 20."""
    text = (STACK / "pml-selection-osu_latency.out").read_bytes().decode(errors="replace")  # the help box's bytes
    assert "cuda_ipc/cuda: matched transport list but not device list" in text
    assert text.count("select: component ob1 selected") == 2


def test_osu_latency_device_to_device_on_the_h200():
    t = table(OSU7 / "osu_latency-7.5.1-h200-cuda-dd.out", "-d cuda D D")
    assert (t["benchmark"], t["verdict"], t["validated"], t["device"]) == ("osu_latency", "complete", "no", "CUDA")
    assert t["title"] == "OSU MPI-CUDA Latency Test v7.5" and [r["size"] for r in t["rows"]] == OSU_SIZES
    rows = {r["size"]: r["latency_us"] for r in t["rows"]}
    assert (rows[8], rows[4 << 20]) == (158.05, 153.32)
    # 7.5.1's point-to-point tests print no `# Send Buffer on DEVICE (D) ...` line: the title names CUDA
    assert t["meta"] == {"datatype": "MPI_CHAR"}
    whats = [n["what"] for n in t["notes"]]
    assert whats.count("help box") == 6 and whats.count("aggregated help messages (PRRTE)") == 2
    assert [n["line"] for n in t["notes"] if n["what"] == "NUL byte after a help message (PRRTE)"] == ["\x00"] * 3


def test_osu_latency_under_mps_is_ten_times_less():
    """Without MPS the two ranks' CUDA contexts time-share the one GPU: 160 us at 1 B; under MPS 16.55 us."""
    plain = table(OSU7 / "osu_latency-7.5.1-h200-cuda-dd.out", "-d cuda D D")["rows"][0]
    mps = table(OSU7 / "osu_latency-7.5.1-h200-cuda-dd-mps.out", "-d cuda D D")
    assert mps["verdict"] == "complete" and (plain["latency_us"], mps["rows"][0]["latency_us"]) == (159.75, 16.55)


def test_osu_bw_device_to_device_4_mib_on_the_h200():
    t = table(OSU7 / "osu_bw-7.5.1-h200-cuda-dd.out", "-d cuda D D")
    assert (t["benchmark"], t["verdict"], t["validated"], t["device"]) == ("osu_bw", "complete", "no", "CUDA")
    assert t["rows"][-1] == {"size": 4 << 20, "bandwidth_MBps": 341777.68}
    ucx = table(OSU7 / "osu_bw-7.5.1-h200-cuda-dd-pml-ucx.out", "-d cuda D D")
    assert ucx["verdict"] == "complete" and ucx["notes"] == [] and ucx["rows"][-1]["bandwidth_MBps"] == 450813.95


@pytest.mark.parametrize("name,args,rows,last", [
    ("osu_bw-7.5.1-h200-cuda-dd-validation", "-c -d cuda D D", 23, 332750.53),
    ("osu_latency-7.5.1-h200-cuda-dd-c-i100", "-c -i 100 -x 10 -d cuda D D", 23, 158.72),
    ("osu_allreduce-7.5.1-h200-cuda-validation", "-c -d cuda", 19, 981.63),
])
def test_osu_with_c_checked_the_device_buffers_on_the_h200(name, args, rows, last):
    t = table(OSU7 / f"{name}.out", args)
    assert (t["verdict"], t["validated"], t["device"], len(t["rows"])) == ("complete", "yes", "CUDA", rows)
    assert {r["validation"] for r in t["rows"]} == {"Pass"}
    assert t["rows"][-1][t["columns"][1]["name"]] == last


def test_osu_latency_cut_by_the_recording_script_s_timeout_is_truncated():
    p = parse(OSU7 / "osu_latency-7.5.1-h200-cuda-dd-cut.out", "-d cuda D D", "--strict")
    assert p.returncode == exits.TRUNCATED and "11 rows, 1..1024 B, truncated" in p.stdout
    assert "the sweep stops at 1024 B; the next size, 2048 B, is within the 1..4194304 B asked for" in p.stderr


def test_mpi_pingpong_cuda_aware_under_the_stack_s_open_mpi_passes_on_the_h200():
    t = table(PINGPONG / "mpi-pingpong-h200-ompi5-cuda-aware.out", "-m cuda-aware -e 4M -n 20")
    assert (t["benchmark"], t["verdict"], t["validated"], t["device"]) == ("mpi-pingpong", "complete", "yes", "CUDA")
    assert t["meta"]["mode"] == "cuda-aware" and t["meta"]["summary"] == "all sizes passed"
    assert [r["size"] for r in t["rows"]] == [8 << k for k in range(20)] and {r["check"] for r in t["rows"]} == {"Pass"}
    assert (t["rows"][0]["time_s"], t["rows"][-1]["bandwidth_GiBps"]) == (0.000160206, 1.721093177)


@pytest.mark.parametrize("mode,last", [("cpu", 8.190388986), ("staged", 2.610555305),
                                       ("cuda-aware-mps", 1.835383152)])
def test_mpi_pingpong_other_modes_under_the_stack_s_open_mpi(mode, last):
    t = table(PINGPONG / f"mpi-pingpong-h200-ompi5-{mode}.out", f"-m {mode.removesuffix('-mps')} -e 4M -n 20")
    assert (t["verdict"], t["validated"]) == ("complete", "yes") and t["rows"][-1]["bandwidth_GiBps"] == last
