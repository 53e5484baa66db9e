"""ci/cuda-wheels.py --toolkit 13.0.2: the cu13 wheels' one nvidia/cu13 tree made into a CUDA prefix whose nvcc
compiles device code for the GH200's sm_90 and whose link stubs stand in for the driver (docs/building.md).

The wheels are large (300 MiB): the test takes them from COMMSTACK_CUDA_WHEELS (a directory holding
`pip download --no-deps` of ci/cuda-wheels.py's pins) and is skipped, saying so, without it."""

import os
import subprocess

import pytest

from commstack.paths import TOP

SCRIPT = TOP / "ci" / "cuda-wheels.py"
WHEELS = os.environ.get("COMMSTACK_CUDA_WHEELS")

#: asks the runtime for a device: with the driver stub loaded, cuInit answers CUDA_ERROR_STUB_LIBRARY
PROGRAM = r"""
#include <cstdio>
#include <cuda_runtime.h>
__global__ void twice(int *x) { x[threadIdx.x] *= 2; }
int main() {
    int n = -1;
    cudaError_t e = cudaGetDeviceCount(&n);
    std::printf("cudaGetDeviceCount: %d (%s)\n", (int)e, cudaGetErrorName(e));
    return 0;
}
"""


def test_an_unknown_toolkit_is_refused_naming_the_known_ones():
    proc = subprocess.run([str(SCRIPT), "--toolkit", "12.9"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "invalid choice: '12.9' (choose from '12.8.1', '13.0.2')" in proc.stderr


@pytest.mark.skipif(not WHEELS, reason="COMMSTACK_CUDA_WHEELS is not set: no directory of the CUDA 13.0.2 wheels")
def test_the_cuda13_wheels_make_a_toolkit_whose_nvcc_builds_sm90_code(tmp_path):
    cuda, nccl = tmp_path / "cuda", tmp_path / "nccl"
    made = subprocess.run([str(SCRIPT), "--toolkit", "13.0.2", "--wheels", WHEELS, "--cuda", str(cuda),
                           "--nccl", str(nccl)], capture_output=True, text=True, timeout=1200)
    assert made.returncode == 0, made.stderr
    assert "Cuda compilation tools, release 13.0, V13.0.88" in made.stdout
    assert f"CUDA 13.0.2 build-time toolkit (no driver, with nvcc): {cuda}" in made.stdout
    # nvcc.profile's layout: lib64 (and lib), nvvm/bin/cicc, include/cccl; the link names the wheels leave out
    assert os.readlink(cuda / "lib") == "lib64" and os.readlink(cuda / "lib64" / "libcudart.so") == "libcudart.so.13"
    assert (cuda / "lib64" / "libcudart_static.a").is_file() and os.access(cuda / "nvvm" / "bin" / "cicc", os.X_OK)
    assert (cuda / "include" / "cccl" / "cuda" / "std" / "version").is_file()
    assert os.readlink(nccl / "lib" / "libnccl.so") == "libnccl.so.2" and (nccl / "include" / "nccl.h").is_file()
    assert '"version": "13.0.2"' in (cuda / "version.json").read_text()

    source = tmp_path / "probe.cu"
    source.write_text(PROGRAM)
    exe = tmp_path / "probe"
    build = subprocess.run([str(cuda / "bin" / "nvcc"), "-gencode=arch=compute_90,code=sm_90", "-o", str(exe),
                            str(source), "-cudart", "shared"], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    sections = subprocess.run(["readelf", "-S", str(exe)], capture_output=True, text=True, check=True).stdout
    assert ".nv_fatbin" in sections   # the device code, compiled by cicc and ptxas, is in the binary
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "LD_LIBRARY_PATH": f"{cuda / 'lib64' / 'stubs' / 'no-driver'}:{cuda / 'lib64'}"})
    assert ran.stdout == "cudaGetDeviceCount: 34 (cudaErrorStubLibrary)\n", ran.stdout + ran.stderr
