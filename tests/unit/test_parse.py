"""Parsers against every recorded real output in the seeds, and corrupted copies of them."""

from pathlib import Path

import pytest
import yaml

from commstack.paths import TOP
from commstack.errors import ParseError, UnknownFormatError
from commstack.results.judge import check_correctness
from commstack.results.parse import parse_nccl, parse_osu, parse_pingpong

SEEDS = TOP / "systems" / "references" / "seeds"
INDEX = yaml.safe_load((SEEDS / "index.yaml").read_text())


def parse_any(name: str):
    text = (SEEDS / name).read_text()
    if name.startswith("cscs-nccl"):
        return [parse_nccl(text)]
    if "pingpong" in name:
        return [parse_pingpong(text)]
    return parse_osu(text)


def test_index_names_every_recorded_output():
    assert sorted(INDEX) == sorted(p.name for p in SEEDS.glob("*.txt"))


@pytest.mark.parametrize("name", sorted(INDEX))
def test_every_seed_output_parses_and_is_correct(name):
    sweeps = parse_any(name)
    assert sweeps and all(s.rows for s in sweeps)
    for s in sweeps:
        assert check_correctness(s) == []


# (file, benchmark, device, rows, first (size, value), last (size, value), column)
EXPECTED = [
    ("cscs-osu-01.txt", "osu_bw", None, 23, (1, 0.95), (4194304, 23982.18), "bandwidth_MBps"),
    ("cscs-osu-02.txt", "osu_bw", "CUDA", 23, (1, 0.90), (4194304, 23989.54), "bandwidth_MBps"),
    ("cscs-osu-05.txt", "osu_bibw", None, 23, (1, 0.93), (4194304, 46417.59), "bandwidth_MBps"),
    ("cscs-osu-07.txt", "osu_latency", None, 23, (1, 3.34), (4194304, 182.39), "latency_us"),
    ("cscs-osu-09.txt", "osu_alltoall", "CUDA", 21, (1, 22.26), (1048576, 486.89), "latency_us"),
    ("cscs-osu-10.txt", "osu_bw", None, 23, (1, 0.16), (4194304, 3121.42), "bandwidth_MBps"),
    ("sarus-osu-01.txt", "osu_latency", None, 24, (0, 1.11), (4194304, 431.85), "latency_us"),
    ("sarus-osu-02.txt", "osu_alltoall", None, 21, (1, 5.46), (1048576, 733.93), "latency_us"),
    ("olcf-pingpong-cpu.txt", "mpi-pingpong", None, 28, (8, 0.008604834), (1073741824, 12.666389375),
     "bandwidth_GiBps"),
    ("olcf-pingpong-cuda-aware.txt", "mpi-pingpong", None, 28, (8, 0.000319968), (1073741824, 43.781843371),
     "bandwidth_GiBps"),
]


@pytest.mark.parametrize("name,bench,device,nrows,first,last,col", EXPECTED)
def test_seed_tables_values(name, bench, device, nrows, first, last, col):
    s = parse_any(name)[0]
    assert (s.benchmark, s.device, len(s.rows)) == (bench, device, nrows)
    assert (s.rows[0]["size"], s.rows[0][col]) == first
    assert (s.rows[-1]["size"], s.rows[-1][col]) == last


def test_osu_v75_header_meta_and_loader_noise():
    s = parse_any("cscs-osu-08.txt")[0]
    assert s.version == "7.5" and s.meta["datatype"] == "MPI_CHAR"
    assert s.columns == ["size", "latency_us", "validation"]
    assert len(s.noise) == 8 and "libcxi" in s.noise[0]  # one loader warning per rank


def test_osu_several_tables_in_one_job_seed_004():
    s = parse_any("nersc10-archer2.txt")
    assert [(x.benchmark, x.meta["datatype"], x.rows[0]["size"], x.rows[0]["latency_us"]) for x in s] == [
        ("osu_allreduce", "MPI_INT", 8, 33.58), ("osu_allreduce", "MPI_INT", 26214400, 29942.75),
        ("osu_alltoall", "MPI_CHAR", 1048576, 87258.19)]


def test_nccl_seed_002_columns_devices_and_summary():
    s = parse_any("cscs-nccl-01.txt")[0]
    assert s.benchmark == "all_reduce_perf" and s.complete is True
    assert s.meta["minBytes"] == 8 and s.meta["maxBytes"] == 134217728 and s.meta["iters"] == 20
    assert s.meta["avg_busbw_GBps"] == pytest.approx(19.7866) and s.meta["out_of_bounds_ok"] is True
    assert [(d["rank"], d["host"], d["device"], d["pci"]) for d in s.meta["devices"]][3:5] == [
        (3, "nid005471", 3, "0039:01:00"), (4, "nid005487", 0, "0009:01:00")]
    assert s.row(134217728)["oop_busbw_GBps"] == 122.57 and s.row(134217728)["ip_busbw_GBps"] == 123.11
    assert s.row(33554432)["oop_time_us"] == 686.5
    nohook = parse_any("cscs-nccl-02.txt")[0]
    assert nohook.row(33554432)["oop_time_us"] == 17388.0  # integer-formatted time column


# ----------------------------------------------------------------------- corrupted copies


def corrupt(name: str, old: str, new: str, count: int = 1) -> str:
    text = (SEEDS / name).read_text()
    assert old in text
    return text.replace(old, new, count)


def test_osu_row_with_extra_field_quotes_the_line():
    bad = corrupt("cscs-osu-01.txt", "65536               22049.82              Pass",
                  "65536               22049.82              Pass   7")
    with pytest.raises(ParseError, match=r"65536 +22049.82 +Pass +7"):
        parse_osu(bad)


def test_osu_truncated_mid_row_is_an_error():
    text = (SEEDS / "cscs-osu-07.txt").read_text()
    cut = text[: text.index("4194304") + len("4194304")]
    with pytest.raises(ParseError, match="row has 1 fields"):
        parse_osu(cut)


def test_osu_unknown_column_and_unknown_title():
    with pytest.raises(UnknownFormatError, match="unknown OSU column 'Bandwidth \\(GB/s\\)'"):
        parse_osu(corrupt("cscs-osu-01.txt", "Bandwidth (MB/s)", "Bandwidth (GB/s)"))
    with pytest.raises(UnknownFormatError, match="Frobnicate"):
        parse_osu(corrupt("cscs-osu-01.txt", "Bandwidth Test", "Frobnicate Test"))


def test_osu_garbage_and_empty():
    with pytest.raises(UnknownFormatError, match="before any OSU header"):
        parse_osu("Segmentation fault (core dumped)\n")
    with pytest.raises(UnknownFormatError):
        parse_osu("")
    with pytest.raises(ParseError, match="not a number"):
        parse_osu(corrupt("cscs-osu-07.txt", "3.34 ", "3,34 "))


def test_osu_fail_row_and_validation_error_are_kept():
    s = parse_osu(corrupt("cscs-osu-01.txt", "23555.35              Pass", "23555.35              Fail")
                  + "DATA VALIDATION ERROR: osu_bw\n")[0]
    assert s.row(262144)["validation"] == "Fail"
    assert check_correctness(s) == ["DATA VALIDATION ERROR: osu_bw", "osu_bw: data validation failed at 262144 B"]


def test_osu_header_only_is_truncated():
    with pytest.raises(ParseError, match="truncated"):
        parse_osu("# OSU MPI Bandwidth Test v7.5\n# Datatype: MPI_CHAR.\n")


def test_nccl_wrong_elements_and_truncation():
    s = parse_nccl(corrupt("cscs-nccl-01.txt", "-1    17.93    0.00    0.00      0", "-1    17.93    0.00    0.00      3"))
    assert check_correctness(s) == ["all_reduce_perf: 3 wrong elements (oop_wrong) at 8 B"]
    text = (SEEDS / "cscs-nccl-01.txt").read_text()
    cut = parse_nccl(text[: text.index("# Out of bounds")])
    assert cut.complete is False and "sweep stopped early" in check_correctness(cut)[0]
    with pytest.raises(ParseError, match="row has 12 fields"):
        parse_nccl(text.replace("1916.4   70.04  122.57      0", "1916.4   70.04  122.57"))


def test_nccl_exponent_numbers_and_oob_failure():
    s = parse_nccl(corrupt("cscs-nccl-01.txt", "1916.4", "1.9164e+03").replace("0 OK", "2 FAILED"))
    assert s.row(134217728)["oop_time_us"] == 1916.4
    assert "2 out-of-bounds values" in check_correctness(s)[0]


def test_pingpong_our_format_check_column_and_end_line():
    text = ("# mpi-pingpong v1.0 mode=cpu ranks=2 loops=10 warmup=5 min=8 max=16\n"
            "Transfer size (B):          8, Transfer Time (s):     0.000000524, Bandwidth (GB/s):     0.014231566, Check: Pass\n"
            "Transfer size (B):         16, Transfer Time (s):     0.000000113, Bandwidth (GB/s):     0.131956265, Check: Fail\n"
            "DATA VALIDATION ERROR: size 16, first wrong byte at 3 on rank 1\n"
            "# mpi-pingpong done: data check FAILED\n")
    s = parse_pingpong(text)
    assert s.meta["mode"] == "cpu" and s.complete and s.sizes == [8, 16]
    assert len(check_correctness(s)) == 2
    with pytest.raises(ParseError, match="sweep goes to 64"):
        parse_pingpong(text.replace("max=16", "max=64"))
    assert parse_pingpong(text.replace("# mpi-pingpong done: data check FAILED\n", "")).complete is False
    with pytest.raises(UnknownFormatError, match="not an mpi-pingpong line"):
        parse_pingpong(text + "garbage\n")
