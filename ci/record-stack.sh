#!/usr/bin/env bash
# Record what an installed env's stack says about itself, as tests/data/stack/ holds it for x86-ompi (and
# tests/data/stack/cuda13/ for x86-ompi-cuda13):
#   ci/record-stack.sh [ENV] [OUTDIR]      (default: x86-ompi, tests/data/stack)
# Each file is a command's own output (stdout and stderr), run from the env's view; build-times.txt
# is perf/build_times.py's. tests/unit/test_stack_build.py reads them.
set -euo pipefail
cd "$(dirname "$0")/.."
env=${1:-x86-ompi} out=${2:-tests/data/stack}
spack=${SPACK_ROOT:-$PWD/.spack/spack}/bin/spack
export SPACK_PYTHON=${SPACK_PYTHON:-${COMMSTACK_VENV:-$PWD/.venv}/bin/python}
view=envs/$env/.spack-env/view
mkdir -p "$out"
record() {  # FILE COMMAND...: the command's output, whatever its exit status, which ends the file
  local file=$1; shift
  local rc=0
  "$@" >"$out/$file" 2>&1 || rc=$?
  echo "exit $rc" >>"$out/$file"
}
record ompi_info.txt "$view/bin/ompi_info"
record ucx_info-v.txt "$view/bin/ucx_info" -v
record ucx_info-d.txt "$view/bin/ucx_info" -d
record ucx-modules.txt ls "$view/lib/ucx"
# the CUDA modules are built; without a GPU driver they do not load, which UCX says only at debug level
record ucx_info-d-debug-cuda.txt sh -c "UCX_LOG_LEVEL=debug '$view/bin/ucx_info' -d 2>&1 | grep 'dlopen.*cuda'"
record fi_info-l.txt "$view/bin/fi_info" -l
record fi_info--version.txt "$view/bin/fi_info" --version
# OSU +cuda links libcuda.so.1 and libnvidia-ml.so.1 (seed 000): without a driver it does not start, and
# for its usage text alone the link stubs stand in for the driver (they are never called by -h)
osu=$view/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency
record osu_latency-h-no-driver.txt "$osu" -h
stubs=$(mktemp -d)
trap 'rm -rf "$stubs"' EXIT
cuda=$("$spack" -e "envs/$env" find --format '{prefix}' cuda)
for lib in libcuda libnvidia-ml; do ln -s "$cuda/lib64/stubs/$lib.so" "$stubs/$lib.so.1"; done
LD_LIBRARY_PATH=$stubs record osu_latency-h.txt "$osu" -h
[ ! -x "$cuda/bin/nvcc" ] || record nvcc--version.txt "$cuda/bin/nvcc" --version   # the toolkit that compiled the device code
# OSU's CUDA kernels (+cuda_kernels: util/kernel.cu by nvcc): their host entry points and the device code section
record osu-cuda-kernels.txt sh -c "nm '$view/libexec/osu-micro-benchmarks/mpi/collective/osu_allreduce' |
  grep -E ' T call_[a-z_]*kernel'; readelf -SW '$view/libexec/osu-micro-benchmarks/mpi/collective/osu_allreduce' | grep -o '\.nv_fatbin'"
"$spack" -e "envs/$env" python perf/build_times.py >"$out/build-times.txt"
"$spack" -e "envs/$env" find --long --variants >"$out/spack-find.txt"
echo "ci/record-stack.sh: $(ls "$out" | wc -l) files in $out"
