"""Suites expand into the srun lines the seeds imply; what a system cannot hold is refused."""

import shlex
from pathlib import Path

import pytest
import yaml

from commstack.paths import TOP
from commstack.run.launch import Launcher
from commstack.run.steps import SuiteError, expand, known_suites, load_suite
from commstack.config import load_system

DATA = TOP / "systems" / "references" / "seeds"
ALPS = load_system("alps-gh200")
GPU_WRAPPER = ["bash", "-c", 'export CUDA_VISIBLE_DEVICES=$SLURM_LOCALID; exec "$@"', "commstack-gpu"]


def lines(suite: str, system=ALPS) -> list[list[str]]:
    launcher = Launcher(system, "srun", {})
    return [launcher.command(s.step) for s in expand(load_suite(suite), system)]


def normal(argv: list[str], hooks: dict | None = None) -> tuple:
    """What a srun line asks for: nodes, total ranks, MPI plugin, EDF, program and its arguments."""
    argv = list(argv)
    for i in range(len(argv)):
        if argv[i:i + len(GPU_WRAPPER)] == GPU_WRAPPER:
            del argv[i:i + len(GPU_WRAPPER)]
            break
    opts, prog = {}, []
    it = iter(argv[1:])
    for a in it:
        if prog or not a.startswith("-"):
            prog.append(a)
        elif a.startswith("--"):
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
    assert set(known_suites()) == {"nersc10", "cscs-images", "container-vs-native", "pingpong", "smoke"}
    for name in known_suites():
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
    got = [(normal(a)[4], normal(a)[0], normal(a)[1], a[a.index("-m") + 1], "cuda" in a) for a in lines("nersc10")]
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


def test_smoke_fits_local_and_nersc10_does_not():
    local = load_system("local")
    assert len(expand(load_suite("smoke"), local)) == 5
    with pytest.raises(SuiteError, match="suite nersc10, osu_latency: needs 2 nodes, system local has 1"):
        expand(load_suite("nersc10"), local)


def test_device_memory_needs_gpus(tmp_path):
    path = tmp_path / "cpu.yaml"
    path.write_text("name: cpu\nnodes: 4\nnode: {cores: 8, gpus: 0, nics: 1}\nlauncher: {mpi: pmix}\n")
    with pytest.raises(SuiteError, match="device memory needs GPUs, system cpu has 0 per node"):
        expand(load_suite("nersc10"), load_system(str(path)))


def test_container_vs_native_scales_in_powers_of_two():
    counts = sorted({normal(a)[0] for a in lines("container-vs-native") if "osu_alltoall" in " ".join(a)})
    assert counts == [2, 4, 8, 16, 32, 64, 128]


def test_bad_suites_are_named_errors(tmp_path, monkeypatch):
    import commstack.run.steps as suites
    with pytest.raises(SuiteError, match="unknown suite 'nope'; known: container-vs-native, cscs-images"):
        load_suite("nope")
    (tmp_path / "bad.yaml").write_text("steps:\n- {benchmark: osu_bw, ranks: 2}\n")
    monkeypatch.setattr(suites, "SUITES_DIR", tmp_path)
    with pytest.raises(SuiteError, match=r"step 1: unknown keys \['ranks'\]"):
        load_suite("bad")
