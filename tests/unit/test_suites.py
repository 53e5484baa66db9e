"""Suites expand into the srun lines the seeds imply; what a system cannot hold is kept, with the reason."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from commstack.paths import SUITES, TOP
from commstack.run.launch import Launcher
from commstack.config import load_suite, load_system, names_in
from commstack.errors import ConfigError
from commstack.run.batch import benchmark_argv
from commstack.run.steps import expand

DATA = TOP / "systems" / "references" / "seeds"
ALPS = load_system("alps-gh200")


def lines(suite: str, system=ALPS) -> list[list[str]]:
    launcher = Launcher(system, "srun", {})
    return [launcher.command(s.step) for s in expand(load_suite(suite), system) if not s.not_run]


def normal(argv: list[str], hooks: dict | None = None) -> tuple:
    """What a srun line asks for: nodes, total ranks, MPI plugin, EDF, program and its arguments. Ours end
    srun's options with `--` (the benchmark's argv after it: run.batch.benchmark_argv); a seed's program follows
    its options."""
    opts, prog = {}, []
    it = iter(argv[1:])
    for a in it:
        if a == "--":
            prog = benchmark_argv(argv)
            break
        if not a.startswith("-"):
            prog = [a, *it]
            break
        if a.startswith("--"):
            k, _, v = a[2:].partition("=")
            opts[k] = v
        else:
            opts[a[1]] = a[2:] or next(it)
    nodes = int(opts.get("N", 1))
    ntasks = int(opts["n"]) if "n" in opts else nodes * int(opts.get("ntasks-per-node", 1))
    env = opts.get("environment")
    if env and hooks is not None:  # the seeds' EDF names -> ours (containers/images.yaml)
        env = ("nccl-tests" if env.startswith("nccl") else "osu-mb") + \
              ("-no-cxi" if hooks.get("cxi_hook") is False else "") + \
              ("-no-awsofinccl" if hooks.get("aws_ofi_nccl_hook") is False else "")
    return nodes, ntasks, opts.get("mpi"), env, Path(prog[0]).name, tuple(prog[1:])


def test_every_suite_loads():
    assert set(names_in(SUITES)) == {"nersc10", "cscs-images", "container-vs-native", "gpu-node", "pingpong", "smoke", "stack"}
    for name in names_in(SUITES):
        assert load_suite(name).steps


def test_cscs_images_holds_every_seed_run():
    ours = {normal(argv) for argv in lines("cscs-images")}
    seeds = yaml.safe_load((DATA / "index.yaml").read_text())
    cscs = {k: v for k, v in seeds.items() if k.startswith("cscs-")}
    assert len(cscs) == 16
    for name, meta in cscs.items():
        want = normal(shlex.split(meta["command"]), meta)
        assert want in ours, f"{name}: {meta['command']} -> {want} not in the suite"


def test_nersc10_on_alps_is_the_seed_004_table():
    got = [(normal(a)[4], normal(a)[0], normal(a)[1], normal(a)[5][normal(a)[5].index("-m") + 1], "cuda" in a)
           for a in lines("nersc10")]
    want = [("osu_latency", 2, 2, "8:8", False), ("osu_latency", 2, 2, "8:8", True),
            ("osu_bibw", 2, 2, "1048576:1048576", False), ("osu_bibw", 2, 2, "1048576:1048576", True),
            ("osu_mbw_mr", 2, 8, "16384:16384", False), ("osu_mbw_mr", 2, 8, "16384:16384", True),      # 1 per NIC
            ("osu_mbw_mr", 2, 576, "16384:16384", False),                                              # 1 per core
            ("osu_mbw_mr", 2, 8, "16384:16384", True),                                                 # 1 per GPU
            ("osu_get_acc_latency", 2, 2, "8:8", False), ("osu_get_acc_latency", 2, 2, "8:8", True),
            ("osu_allreduce", 2600, 10400, "8:8", False), ("osu_allreduce", 2600, 10400, "8:8", True),
            ("osu_allreduce", 2600, 10400, "26214400:26214400", False),
            ("osu_allreduce", 2600, 10400, "26214400:26214400", True),
            ("osu_alltoall", 2600, 10399, "1048576:1048576", False),                                   # odd
            ("osu_alltoall", 2600, 10399, "1048576:1048576", True)]
    assert got == want
    for argv in lines("nersc10"):  # iteration count set, no warm-up excluded
        assert "-i" in argv and argv[argv.index("-x") + 1] == "0"


def test_odd_rule_keeps_an_odd_product(tmp_path):
    path = tmp_path / "three.yaml"
    path.write_text("name: three\nnodes: 3\nnode: {cores: 8, gpus: 1, nics: 1}\nlauncher: {mpi: pmix}\n")
    alltoall = [a for a in lines("nersc10", load_system(str(path))) if "osu_alltoall" in " ".join(a)]
    assert {normal(a)[1] for a in alltoall} == {3}  # 3 nodes x 1 NIC is odd already


def test_smoke_fits_local_and_nersc10_is_kept_with_reasons():
    local = load_system("local")
    assert [s.not_run for s in expand(load_suite("smoke"), local)] == [None] * 7
    nersc = expand(load_suite("nersc10"), local)
    assert len(nersc) == 16 and all(s.not_run for s in nersc)
    assert nersc[0].not_run == "needs 2 nodes, system local has 1"
    assert nersc[10].not_run == "1 rank on 1 node: osu_allreduce needs at least 2"


def test_a_step_asks_for_gpus_for_device_memory_or_a_tool_that_needs_them():
    """seed 000/002's suite on Alps: OSU in host memory needs no GPU, in device memory one; nccl-tests always."""
    gpus = {s.step.name: s.step.gpus for s in expand(load_suite("cscs-images"), ALPS)}
    assert gpus["osu_bw-inter-N2-n2-host-native"] is False and gpus["osu_bw-inter-N2-n2-device-native"] is True
    assert gpus["all_reduce_perf-N2-n8-host-native"] is True


def test_device_memory_needs_gpus(tmp_path):
    path = tmp_path / "cpu.yaml"
    path.write_text("name: cpu\nnodes: 4\nnode: {cores: 8, gpus: 0, nics: 1}\nlauncher: {mpi: pmix}\n")
    steps = expand(load_suite("nersc10"), load_system(str(path)))
    device = [s for s in steps if s.tags["memory"] == "device"]
    assert device and {s.not_run for s in device} == {"device memory needs GPUs, system cpu has none",
                                                      "ranks_per_node gpu: system cpu has 0 gpus per node"}
    host = {s.id: s.not_run for s in steps if s.tags["memory"] == "host"}
    assert host.pop("osu_alltoall-N4-n3-host-native") == \
        "an odd rank count on 4 nodes x 1 would leave 3 ranks, fewer than the nodes"
    assert set(host.values()) == {None}


def test_nccl_tests_in_host_memory_is_not_run_where_the_nodes_have_no_gpu():
    """nccl-tests needs GPUs whatever the step's memory: cscs-images' all_reduce_perf on 2 nodes without any."""
    steps = {s.id: s.not_run for s in expand(load_suite("cscs-images"), load_system("local-multinode"))}
    assert steps["all_reduce_perf-N2-n8-host-native"] == "nccl-tests runs on GPUs only, system local-multinode has none"
    assert steps["osu_bw-inter-N2-n2-host-native"] is None


def test_the_gpu_node_suite_is_not_run_on_local_and_runs_on_a_gpu_system():
    """`bin/commstack suite gpu-node --dry-run`: on local every step is kept with the reason; on Alps each is a
    srun line, nccl-tests on one GPU (-g 1) and OSU with device buffers."""
    def dry(system):
        return subprocess.run([sys.executable, "-m", "commstack", "suite", "gpu-node", "--system", system, "--dry-run",
                               "--no-build", "--pingpong", "/bin/true"], capture_output=True, text=True, timeout=120)
    local = dry("local")
    assert local.returncode == 0, local.stderr
    kept = [line for line in local.stdout.splitlines() if line.startswith("# not run on local: ")]
    assert len(kept) == 7 and all(line.endswith(": device memory needs GPUs, system local has none") for line in kept)
    assert "suite gpu-node on local: 7 steps, 7 not runnable here" in local.stdout
    alps = dry("alps-gh200").stdout
    assert alps.count("srun ") == 7 and "'$NCCL_TESTS/sendrecv_perf' -b 8 -e 128M -f 2 -g 1" in alps
    # OSU's placeholder, or the local Spack env's view where this checkout has one set up (.ci/run beside a mirror)
    assert re.search(r"(?:'\$OSU_MPI|/\S+/libexec/osu-micro-benchmarks/mpi)/collective/osu_allreduce'? "
                     r"-c -m 8:1048576 -d cuda", alps), alps


def test_pingpong_runs_its_cpu_mode_on_the_multinode_system():
    steps = expand(load_suite("pingpong"), load_system("local-multinode"))
    assert [(s.tags["mode"], s.not_run) for s in steps] == [
        ("cpu", None), ("staged", "device memory needs GPUs, system local-multinode has none"),
        ("cuda-aware", "device memory needs GPUs, system local-multinode has none")]


def test_container_vs_native_scales_in_powers_of_two():
    counts = sorted({normal(a)[0] for a in lines("container-vs-native") if "osu_alltoall" in " ".join(a)})
    assert counts == [2, 4, 8, 16, 32, 64, 128]


def test_unknown_suite_is_named():
    with pytest.raises(ConfigError, match="unknown suite 'nope'; known: container-vs-native, cscs-images"):
        load_suite("nope")


def test_a_suite_file_anywhere_is_collected_when_named(tmp_path):
    """`commstack suite /abs/path/file.yaml` (--help: "or a suite file") runs pytest on that file."""
    suite = tmp_path / "mine.yaml"
    suite.write_text("name: mine\ndescription: a suite file outside suites/\nsteps:\n"
                     "- {benchmark: mpi-pingpong, mode: cpu, nodes: 1, ranks_per_node: 2, sizes: [8, 8]}\n")
    p = subprocess.run([sys.executable, "-m", "pytest", str(suite), "--collect-only", "-q", "--system", "local",
                        "-p", "no:cacheprovider", "--rootdir", str(TOP), "-c", str(TOP / "pytest.ini")],
                       capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0 and "::mpi-pingpong-cpu-N1-n2-host-native\n" in p.stdout, p.stdout + p.stderr
    assert "1 test collected" in p.stdout


def test_one_rank_may_drive_every_gpu_of_nccl_tests_not_of_osu(tmp_path):
    """nccl-tests' min_ranks 1 (-g 8: one process, eight GPUs); OSU's 2. nccl-tests always gets GPUs and
    NCCL_DEBUG=INFO (its net plugin lines), and has no native build (its image runs it)."""
    from commstack.errors import BinaryNotFoundError
    from commstack.run.lifecycle import launched_step
    from commstack.tools import TOOLS
    suite = tmp_path / "one.yaml"
    suite.write_text("name: one\nsteps:\n- {benchmark: all_reduce_perf, nodes: 1, ranks_per_node: 1, args: [-g, '4']}\n"
                     "- {benchmark: osu_latency, nodes: 1, ranks_per_node: 1}\n")
    nccl, osu = expand(load_suite(str(suite)), ALPS)
    assert (nccl.not_run, nccl.step.ntasks, nccl.step.gpus) == (None, 1, True)
    assert launched_step(nccl, nccl.step.argv).variables == {"NCCL_DEBUG": "INFO"}
    with pytest.raises(BinaryNotFoundError, match="run it in the nccl-tests image"):
        TOOLS["nccl-tests"].native(None)
    assert osu.not_run == "1 rank on 1 node: osu_latency needs at least 2"


def test_osu_device_buffers_both_sides_point_to_point_and_one_for_collectives():
    """OSU's -d cuda: a point-to-point or one-sided test names each side's buffer (D D), a collective takes none."""
    ends: dict[str, set] = {}
    for s in expand(load_suite("nersc10"), ALPS):
        if not s.not_run and s.tags["memory"] == "device":
            argv = benchmark_argv(Launcher(ALPS, "srun", {}).command(s.step))
            ends.setdefault(Path(argv[0]).parent.name, set()).add(tuple(argv[argv.index("-d"):]))
    assert ends == {"pt2pt": {("-d", "cuda", "D", "D")}, "one-sided": {("-d", "cuda", "D", "D")},
                    "collective": {("-d", "cuda")}}


def test_an_osu_size_with_a_unit_is_refused_with_the_reason(tmp_path):
    """OSU reads -m with atoll: `1M` would run 1 byte, so a suite gives OSU bytes (nccl-tests takes 128M)."""
    suite = tmp_path / "mine.yaml"
    suite.write_text("name: mine\ndescription: x\nsteps:\n- {benchmark: osu_bw, nodes: 2, sizes: [8, 1M]}\n")
    with pytest.raises(ConfigError, match=r"sizes \[8, '1M'\]: OSU reads -m with atoll, so 1M would mean 1 byte; "
                                          r"give bytes"):
        load_suite(str(suite))
