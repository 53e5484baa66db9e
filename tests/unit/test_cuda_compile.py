"""mpi-pingpong's GPU modes compiled on any machine, against CUDA 12.8 from the PyPI wheels of
requirements/dev.txt and the system MPI's headers; run for real where a GPU is, else not run, with why."""

import importlib.metadata
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from commstack.config import load_system
from commstack.errors import StepCrashedError
from commstack.paths import TOP
from commstack.tools.mpi_pingpong import parse_pingpong
from commstack.run.launch import Launcher, Step

SRC = TOP / "src" / "mpi-pingpong"
pytestmark = pytest.mark.skipif(not shutil.which("mpicc") or not shutil.which("mpirun"),
                                reason="no mpicc/mpirun (ci/install-deps.sh installs Open MPI)")


def _wheels() -> Path:
    """site-packages/nvidia, where the CUDA wheels put cuda_runtime/ and cuda_nvcc/."""
    spec = importlib.util.find_spec("nvidia.cuda_runtime")
    if spec is None:
        pytest.fail("the CUDA wheels of requirements/dev.txt are not installed: run bin/commstack venv")
    return Path(list(spec.submodule_search_locations)[0]).parent


def _no_gpu() -> str | None:
    """Why the GPU modes cannot run here; None where nvidia-smi lists a GPU."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "no GPU: nvidia-smi is not on PATH"
    proc = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 or "GPU" not in proc.stdout:
        return f"no GPU: nvidia-smi -L exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[:200]}"
    return None


def _needed(exe: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, tuple[Path, subprocess.CompletedProcess]]:
    """The CPU build and the CUDA build, each with -Werror: a warning fails the build."""
    out = tmp_path_factory.mktemp("pingpong-builds")
    made = {}
    for name, extra in (("cpu", []), ("cuda", ["CUDA=1", f"CUDA_HOME={_wheels()}"])):
        exe = out / name / "mpi-pingpong"
        exe.parent.mkdir()
        proc = subprocess.run(["make", "-C", str(SRC), "-B", f"OUT={exe}", "CFLAGS=-O2 -g -Werror", *extra],
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{name} build failed:\n{proc.stdout}{proc.stderr}"
        made[name] = (exe, proc)
    return made


def _run(exe: Path, mode: str, outdir: Path, *extra: str):
    step = Step(f"pingpong-{mode}", [str(exe), "-m", mode, *extra], ntasks=2, timeout_s=120)
    return Launcher(load_system("local"), "mpirun").run(step, outdir)


def test_wheels_are_cuda_12_8():
    for dist in ("nvidia-cuda-runtime-cu12", "nvidia-cuda-nvcc-cu12"):
        assert importlib.metadata.version(dist).startswith("12.8."), dist
    header = (_wheels() / "cuda_runtime" / "include" / "cuda_runtime_api.h").read_text()
    assert "#define CUDART_VERSION  12080" in header


def test_cuda_build_uses_the_wheels_and_links_cudart(builds):
    exe, proc = builds["cuda"]
    nvidia = _wheels()
    assert "-DCOMMSTACK_CUDA" in proc.stdout
    assert f"-I{nvidia}/cuda_runtime/include" in proc.stdout and f"-I{nvidia}/cuda_nvcc/include" in proc.stdout
    assert "warning" not in proc.stderr
    needed = _needed(exe)
    assert "libcudart.so.12" in needed and any(n.startswith("libmpi") for n in needed)
    ldd = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, check=True).stdout
    assert f"libcudart.so.12 => {nvidia}/cuda_runtime/lib/libcudart.so.12" in ldd
    # both GPU modes are compiled in: the staged copies and the CUDA-aware MPI query
    symbols = subprocess.run(["nm", "-D", "--undefined-only", str(exe)], capture_output=True, text=True,
                             check=True).stdout
    for sym in ("cudaMemcpy", "cudaMalloc", "cudaGetDeviceCount", "cudaSetDevice", "MPIX_Query_cuda_support"):
        assert sym in symbols, sym
    assert "libcudart.so.12" not in _needed(builds["cpu"][0])


def test_cuda_build_runs_the_cpu_mode_without_a_driver(builds, tmp_path):
    result = _run(builds["cuda"][0], "cpu", tmp_path, "-e", "64K", "-n", "10")
    sweep = parse_pingpong(result.stdout)
    assert sweep.complete and sweep.meta["mode"] == "cpu" and sweep.sizes[-1] == 65536
    assert all(r["check"] == "Pass" for r in sweep.rows)


@pytest.mark.parametrize("mode", ["staged", "cuda-aware"])
def test_gpu_mode_without_a_gpu_is_a_clear_error(builds, tmp_path, mode):
    if _no_gpu() is None:
        pytest.skip("a GPU is here: test_gpu_modes_run runs the modes for real")
    with pytest.raises(StepCrashedError, match="exit status 3"):
        _run(builds["cuda"][0], mode, tmp_path, "-e", "64K")
    err = (tmp_path / "stderr.txt").read_text()
    for rank in (0, 1):
        assert f"mpi-pingpong: error (rank {rank}): mode '{mode}': no usable CUDA device" in err
    assert "Segmentation fault" not in err and "MPI_ABORT" not in err and "signal" not in err
    assert (tmp_path / "stdout.txt").read_text() == ""  # refused before the header


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["cpu", "staged", "cuda-aware"])
def test_gpu_modes_run(builds, tmp_path, mode):
    why = _no_gpu()
    if why:
        pytest.skip(f"not run: {why}")
    try:
        result = _run(builds["cuda"][0], mode, tmp_path, "-e", "4M", "-n", "20")
    except StepCrashedError:
        err = (tmp_path / "stderr.txt").read_text()
        if mode == "cuda-aware" and "this MPI library is not CUDA-aware" in err:
            pytest.skip(f"not run: {err.strip().splitlines()[-1]}")
        raise
    sweep = parse_pingpong(result.stdout)
    assert sweep.complete and sweep.meta["mode"] == mode and sweep.sizes[-1] == 4 << 20
    assert sweep.device == (None if mode == "cpu" else "CUDA")
    assert all(r["check"] == "Pass" and r["bandwidth_GiBps"] > 0 for r in sweep.rows)
