#!/usr/bin/env bash
# Records nccl-tests on a real GPU: builds the nccl-tests source tree it is given (2.17.1 here) with the
# machine's nvcc (MPI=0, sm_90 only) against NCCL from the pip package nvidia-nccl-cu13, runs each binary on
# one GPU with its data check on (-c 1, the default) and NCCL_DEBUG=VERSION (NCCL's version line), plus
# all_reduce_perf with NCCL_DEBUG=INFO (as the harness runs it) and with -c 0, each output stdout and stderr
# together, bytes as printed. Then, only where the machine has an MPI (mpicc and mpirun), mpi-pingpong's
# CUDA modes. Written for the device machine lent to a session (no network, root, nvcc 13.0, driver 580):
# everything goes to OUT as three files: record.log (what ran, with nvidia-smi, nvcc, NCCL, MPI found),
# build.log, and recorded.tar (the outputs, named as tests/data/corpus/nccl-tests/ names them; re-packed
# after each run, so that a run cut by a time limit still brings back what was recorded before it).
# Usage: NCCL_TESTS_VERSION=2.17.1 tests/data/corpus/record-gpu.sh NCCL_TESTS_SRC OUT [MPI_PINGPONG_SRC]
set -uo pipefail
# the source tree's tag, for the file names: 2.16.7-2.17.3 print no version of their own
ver=${NCCL_TESTS_VERSION:?NCCL_TESTS_VERSION: the tag of NCCL_TESTS_SRC, e.g. 2.17.1}
src=$(cd "${1:?NCCL_TESTS_SRC: an nccl-tests source tree}" && pwd)
out=${2:?OUT: the folder for the results}
pingpong=${3:+$(cd "$3" && pwd)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/rec"

say() { printf '\n== %s\n' "$*"; }
pack() { tar -C "$work/rec" -cf "$out/recorded.tar.part" . && mv "$out/recorded.tar.part" "$out/recorded.tar"; }

main() {
  say "machine"
  date -u
  uname -a
  nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print tolower($2)}')  # h200, h100
  echo "gpu tag: ${gpu:?nvidia-smi names no GPU}"

  say "CUDA"
  nvcc=$(command -v nvcc || find /usr/local /opt -name nvcc -type f 2>/dev/null | head -1)
  echo "nvcc: ${nvcc:?no nvcc}"
  "$nvcc" --version
  cuda=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  cuda_lib=$cuda/lib64
  [ -d "$cuda_lib" ] || cuda_lib=$cuda/lib
  if [ ! -e "$cuda_lib/libcudart.so" ]; then  # a pip layout: only libcudart.so.N, and lib/ where nvcc looks
    mkdir "$work/cudart" && ln -s "$cuda_lib"/* "$work/cudart/"  # in lib64/: -L this for cudadevrt too
    ln -s "$(ls "$cuda_lib"/libcudart.so.[0-9]* | head -1)" "$work/cudart/libcudart.so"
    cuda_ldir=$work/cudart
  else
    cuda_ldir=$cuda_lib
  fi
  echo "CUDA_HOME=$cuda CUDA_LIB=$cuda_lib (linking from $cuda_ldir)"

  say "NCCL (pip)"
  python3 -m pip show nvidia-nccl-cu13 2>/dev/null | head -3
  nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' ||
         dirname "$(dirname "$(find / -xdev -path '*nvidia/nccl/lib/libnccl.so.2' 2>/dev/null | head -1)")")
  echo "nvidia.nccl: $nccl"
  ls -l "$nccl" "$nccl/include" "$nccl/lib"
  grep -E '^#define NCCL_(MAJOR|MINOR|PATCH|SUFFIX|VERSION_CODE)' "$nccl/include/nccl.h"
  mkdir -p "$work/nccl-home/lib"  # NCCL_HOME: the wheel's headers, and libnccl.so for -lnccl
  ln -s "$nccl/include" "$work/nccl-home/include"
  ln -s "$nccl/lib/libnccl.so.2" "$work/nccl-home/lib/libnccl.so"

  say "build nccl-tests ($src)"
  grep -m1 -i 'version' "$src/README.md" || true
  cp -r "$src" "$work/nccl-tests"
  build=(make -C "$work/nccl-tests/src" -j16 MPI=0 CUDA_HOME="$cuda" CUDA_LIB="$cuda_ldir" NVCC="$nvcc"
         NCCL_HOME="$work/nccl-home" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR="$work/build")
  echo "${build[*]}"
  time "${build[@]}" >"$out/build.log" 2>&1
  echo "make exit $?"
  tail -5 "$out/build.log"
  ls -l "$work/build"
  cuobjdump --list-elf "$work/build/all_reduce_perf" 2>&1 | head -3

  export LD_LIBRARY_PATH=$nccl/lib:$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  ldd "$work/build/all_reduce_perf" | grep -E 'nccl|cudart'

  record() {  # record NAME BINARY ENV...: run ./build/BINARY ARGS[@] under ENV as NAME.out (stdout, stderr)
    local name=$1 bin=$2; shift 2
    local exe=$work/build/$bin
    if [ ! -x "$exe" ]; then echo "not built: $bin"; return; fi
    echo "\$ cd build && $* ./$bin ${ARGS[*]}"
    (cd "$work/build" && env "$@" timeout 90 "./$bin" "${ARGS[@]}") >"$work/rec/$name.out" 2>&1
    echo "exit $? -> $name.out ($(wc -l <"$work/rec/$name.out") lines)"
    grep -E '^NCCL version|#wrong|Out of bounds|Avg bus' "$work/rec/$name.out" | head -3
    tail -n 8 "$work/rec/$name.out" | grep -E '^ +134217728 ' || true
    pack
  }

  say "nccl-tests runs"
  ARGS=(-b 8 -e 128M -f 2 -g 1)
  for b in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv hypercube gather scatter; do
    record "${b}_perf-$ver-$gpu-c1" "${b}_perf" NCCL_DEBUG=VERSION
  done
  record "all_reduce_perf-$ver-$gpu-nccl-debug-info" all_reduce_perf NCCL_DEBUG=INFO
  ARGS=(-b 8 -e 128M -f 2 -g 1 -c 0)
  record "all_reduce_perf-$ver-$gpu-c0" all_reduce_perf NCCL_DEBUG=VERSION

  say "MPI on this machine (mpi-pingpong's CUDA modes need one)"
  command -v mpicc mpirun mpiexec || echo "no mpicc, mpirun or mpiexec on PATH"
  timeout 60 find / -xdev \( -name mpicc -o -name mpirun -o -name 'libmpi.so*' \) 2>/dev/null | head -20
  python3 -c 'import mpi4py; print("mpi4py", mpi4py.__version__, mpi4py.get_config())' 2>&1 | tail -1
  if [ -n "$pingpong" ] && command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    mpirun --version 2>&1 | head -2
    launch=(mpirun -np 2)
    mpirun --version 2>&1 | grep -q 'Open MPI' && launch+=(--allow-run-as-root --oversubscribe)
    make -C "$pingpong" -B CUDA=1 CUDA_HOME="$cuda" OUT="$work/mpi-pingpong" 2>&1 | tail -5
    for mode in staged cuda-aware; do
      echo "\$ ${launch[*]} mpi-pingpong -m $mode -e 4M -n 20"
      timeout 90 "${launch[@]}" "$work/mpi-pingpong" -m "$mode" -e 4M -n 20 >"$work/rec/mpi-pingpong-$gpu-$mode.out" 2>&1
      echo "exit $?"
      pack
    done
  fi
  say "done"
  date -u
}

main 2>&1 | tee "$out/record.log"
