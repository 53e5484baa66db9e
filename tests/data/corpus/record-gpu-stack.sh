#!/usr/bin/env bash
# Records the CUDA-aware stack that this repository's Spack recipes built (an installed env: x86-ompi, CUDA 12.8.1,
# or x86-ompi-cuda13, CUDA 13.0.2: Open MPI 5.0.8 +cuda, PMIx, PRRTE, hwloc, UCX 1.19.0 +cuda +gdrcopy, Libfabric,
# GDRCopy, mpi-pingpong, OSU 7.5.1 +cuda, nccl-tests 2.17.1 where the env has them) moving GPU buffers on a machine
# lent to a session (one GPU, root, no network, its own driver, no Spack).
#   pack ENV TARBALL     (here, where Spack built the env) copies the env's install prefixes of the stack (no
#                        headers, man pages or static archives, debug info stripped from the copies), the
#                        libcudart of the CUDA they were built against, the Debian libraries they need that are
#                        not glibc, and stack.txt (each package's prefix, as `spack find` says) into TARBALL
#                        (tar.xz): the binaries' RPATHs name those absolute prefixes, so they are unpacked at the
#                        same paths there. NCCL is not packed (libnccl.so.2 is 200 MiB): record takes the GPU
#                        machine's own (pip's nvidia-nccl-cu13, as record-gpu.sh), else the env's NCCL prefix.
#   record TARBALL OUT   (on the GPU machine) unpacks it, prints what Open MPI and UCX say of CUDA, and runs,
#                        2 ranks on the one GPU under the packed mpirun, mpi-pingpong's three modes and OSU
#                        with device buffers, and nccl-tests on the one GPU (-g 1); each output stdout and stderr
#                        together, bytes as printed, in OUT/recorded.tar (re-packed after each run, so that a
#                        run cut by a time limit still brings back what was recorded before it); OUT/record.log
#                        says what ran. ONLY=REGEX runs only the runs whose output name matches (the probes always).
# --dry-run after record: the same on a machine without a GPU, the prefixes bind-mounted in a private mount
# namespace (unshare) instead of unpacked over their install tree, to see that every library resolves before
# device time.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/../../.." && pwd)
#: what is packed of an env: the stack, built by our recipes (gcc-runtime: the compiler's, by RPATH)
STACK=(openmpi pmix prrte hwloc ucx libfabric gdrcopy mpi-pingpong osu-micro-benchmarks nccl-tests gcc-runtime)
# glibc's and the compiler's own libraries (gcc-runtime's come by RPATH) and the driver's: the GPU machine has its own
NOT_PACKED='^(libc|libm|libstdc\+\+|libgcc_s|libdl|libpthread|librt|libresolv|ld-linux-x86-64|libcuda|libnvidia-ml|libnccl|linux-vdso)\.so'

say() { printf '\n== %s\n' "$*"; }
elves() { find "$@" -type f -exec sh -c 'for f; do head -c4 "$f" | grep -q ELF && echo "$f"; done' sh {} +; }

pack() {
  local env=$1 tarball=$2 stage lib dep name prefix root="" prefixes=() cuda
  local spack=${SPACK_ROOT:-$TOP/.spack/spack}/bin/spack
  export SPACK_PYTHON=${SPACK_PYTHON:-$TOP/.venv/bin/python}
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  "$spack" -e "$env" find --format '{name} {prefix}' >"$stage/found" || return 1
  while read -r name prefix; do
    if [[ " ${STACK[*]} cuda nccl " == *" $name "* ]]; then echo "$name $prefix" >>"$stage/stack.txt"; fi
    [[ " ${STACK[*]} " == *" $name "* ]] || continue
    prefixes+=("$prefix")
    [ -n "$root" ] || root=$(dirname "$prefix")
    [ "$(dirname "$prefix")" = "$root" ] || { echo "$prefix is not in the install tree $root" >&2; return 1; }
  done <"$stage/found"
  cuda=$(awk '$1 == "cuda" {print $2}' "$stage/stack.txt")
  [ -n "$cuda" ] && [ -n "$root" ] || { echo "env $env: no installed stack or no cuda in it" >&2; return 1; }
  echo "root $root" >>"$stage/stack.txt"
  cat "$stage/stack.txt"
  mkdir -p "$stage/$root" "$stage/$cuda/lib64" "$stage/syslib"
  for p in "${prefixes[@]}"; do
    cp -a "$p" "$stage/$root/"
    rm -rf "$stage/$p"/{include,share/man,share/doc,.spack/archived-files}
    find "$stage/$p" \( -name '*.a' -o -name '*.la' -o -name 'lib[alt]san.so*' -o -name 'libubsan.so*' \) -delete
  done
  cp -a "$cuda"/lib64/libcudart.so.[0-9]* "$stage/$cuda/lib64/"
  ln -s lib64 "$stage/$cuda/lib"
  elves "$stage" | xargs strip --strip-debug
  # the system libraries they load, and what those load in turn (ldd resolves the closure)
  elves "${prefixes[@]}" "$cuda"/lib64/libcudart.so.[0-9]* | xargs -n1 ldd 2>/dev/null |
    awk '$2 == "=>" && $3 ~ "^/(usr/)?lib/" {print $1, $3}' | sort -u | while read -r lib dep; do
      [[ $lib =~ $NOT_PACKED ]] || cp -L "$dep" "$stage/syslib/$lib"
    done
  strip --strip-debug "$stage"/syslib/*
  ls -l "$stage/syslib"
  tops=$(printf '%s\n' "$root" "$cuda" | cut -d/ -f2 | sort -u)   # opt, work, ...: where the prefixes go
  (cd "$stage" && du -sh $tops syslib)
  tar -C "$stage" -cf - stack.txt syslib $tops | xz -T0 -6 >"$tarball.part" && mv "$tarball.part" "$tarball"
  ls -l "$tarball"
  echo "pack: $(du -m "$tarball" | cut -f1) MiB ($(stat -c %s "$tarball") bytes)"
}

record() {
  local tarball=$1 out=$2 work dry=${3:-}
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir "$work/rec"
  pack_out() { tar -C "$work/rec" -cf "$out/recorded.tar.part" . && mv "$out/recorded.tar.part" "$out/recorded.tar"; }

  say "machine"
  date -u
  uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv || echo "no nvidia-smi answer"
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | awk '{print tolower($2)}')
  gpu=${gpu:-nogpu}
  echo "gpu tag: $gpu"
  lsmod 2>/dev/null | grep -E '^(gdrdrv|nvidia_peermem)' || echo "no gdrdrv or nvidia_peermem kernel module"

  say "unpack $tarball"
  tar -xJf "$tarball" -O stack.txt >"$work/stack.txt" || return 1
  at() { awk -v n="$1" '$1 == n {print $2}' "$work/stack.txt"; }
  local root cuda ompi ucx osu pingpong tests nccl
  root=$(at root) cuda=$(at cuda) ompi=$(at openmpi) ucx=$(at ucx) tests=$(at nccl-tests)
  osu=$(at osu-micro-benchmarks)/libexec/osu-micro-benchmarks/mpi pingpong=$(at mpi-pingpong)/bin/mpi-pingpong
  cat "$work/stack.txt"
  if [ "$dry" = --dry-run ]; then
    tar -C "$work" -xJf "$tarball" syslib
  else
    [ ! -e "$ompi" ] || { echo "$ompi exists already: not unpacking over it"; return 1; }
    tar -C / --anchored --exclude=syslib --exclude=stack.txt -xJf "$tarball" && tar -C "$work" -xJf "$tarball" syslib ||
      return 1
  fi
  # the outputs' names: the GPU and the CUDA major the stack was built against (libcudart.so.N)
  tag=$gpu-cuda$(find "$cuda/lib64/" -maxdepth 1 -name 'libcudart.so.[0-9]*' -printf '%f\n' | head -1 | grep -o '[0-9]*$')
  echo "output tag: $tag"
  libcuda=$(ldconfig -p | awk '/libcuda\.so\.1 / {print $NF; exit}')
  for d in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [ -n "$libcuda" ] || [ ! -e "$d/libcuda.so.1" ] || libcuda=$d/libcuda.so.1
  done
  [ "$dry" != --dry-run ] || libcuda=$cuda/lib64/stubs/no-driver/libcuda.so.1
  echo "libcuda: ${libcuda:-none found}"
  # NCCL: the machine's own (pip's nvidia-nccl-cu13), else the env's external where this machine has it
  nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0] + "/lib")' 2>/dev/null)
  [ -e "$nccl/libnccl.so.2" ] || nccl=$(at nccl)/lib
  [ -e "$nccl/libnccl.so.2" ] && echo "libnccl.so.2: $nccl" || echo "libnccl.so.2: none found (nccl-tests will say so)"
  export LD_LIBRARY_PATH=${libcuda:+$(dirname "$libcuda"):}$nccl:$work/syslib
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export PATH=$ompi/bin:$ucx/bin:$PATH:/usr/local/nvidia/bin

  say "libraries (nothing may be missing; where each resolves)"
  missing=$(elves "$root" "$cuda/lib64" | xargs -n1 ldd 2>&1 | grep -E 'not found' | sort | uniq -c)
  echo "${missing:-none missing}"
  ldd "$osu/pt2pt/osu_bw" "$ucx/lib/ucx/libuct_cuda.so.0" "$ompi/lib/openmpi/mca_accelerator_cuda.so" \
    ${tests:+"$tests/bin/all_reduce_perf"} |
    grep -E '=>' | awk '{print $1, $3}' | sort -u

  say "what Open MPI and UCX say of CUDA"
  probe() { echo "\$ $*"; "$@" >"$work/rec/$name.out" 2>&1; echo "exit $? -> $name.out"; pack_out; }
  name=ompi_info-cuda-$tag probe sh -c 'ompi_info --parsable --all | grep -E "cuda|accelerator"'
  name=ucx_info-v-$tag probe ucx_info -v
  name=ucx_info-d-$tag probe ucx_info -d
  cat "$work/rec/ucx_info-v-$tag.out"
  grep -i -A2 -E 'transport: *(cuda|gdr)' "$work/rec/ucx_info-d-$tag.out" || echo "ucx_info -d names no CUDA transport"
  grep -E 'mpi_built_with_cuda_support:value|opal_cuda_support:value|:(accelerator|btl|coll):[a-z]*cuda:version:"comp' \
    "$work/rec/ompi_info-cuda-$tag.out"

  local base=(mpirun -np 2 --allow-run-as-root --oversubscribe --bind-to none)
  launch=("${base[@]}")
  run() {  # run SECONDS NAME ARGS...: ${launch[@]} ARGS as NAME.out, stopped after SECONDS
    local limit=$1 name=$2; shift 2
    [[ $name =~ ${ONLY:-.} ]] || return 0
    echo "\$ ${launch[*]} $*"
    timeout "$limit" "${launch[@]}" "$@" >"$work/rec/$name.out" 2>&1
    echo "exit $? -> $name.out ($(wc -l <"$work/rec/$name.out") lines)"
    tail -n 4 "$work/rec/$name.out"
    pack_out
  }
  say "which PML carries device buffers (verbose selection, 8 B only)"
  run 40 pml-selection-$tag --mca pml_base_verbose 10 --mca pml_ucx_verbose 10 "$osu/pt2pt/osu_latency" \
    -d cuda -m 8:8 D D
  say "mpi-pingpong, the three modes"
  for mode in cpu staged cuda-aware; do
    run 40 "mpi-pingpong-$tag-ompi5-$mode" "$pingpong" -m "$mode" -e 4M -n 20
  done
  # two ranks on one GPU: 160 us a message (OSU's latency) on the H200 (2026-11-27): 10000 iterations a size
  # need about a minute, and with -c (a device kernel and a check around each) 100 iterations a size
  say "OSU 7.5.1, device buffers"
  run 100 "osu_latency-7.5.1-$tag-cuda-dd" "$osu/pt2pt/osu_latency" -d cuda D D
  run 40 "osu_bw-7.5.1-$tag-cuda-dd" "$osu/pt2pt/osu_bw" -d cuda D D
  run 60 "osu_latency-7.5.1-$tag-cuda-dd-validation-i100" "$osu/pt2pt/osu_latency" -c -i 100 -x 10 -d cuda D D
  run 40 "osu_allreduce-7.5.1-$tag-cuda-validation" "$osu/collective/osu_allreduce" -c -d cuda
  run 40 "osu_bw-7.5.1-$tag-cuda-dd-validation" "$osu/pt2pt/osu_bw" -c -d cuda D D
  say "OSU through UCX's PML, its CUDA transports allowed"
  launch+=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any)
  run 100 "osu_latency-7.5.1-$tag-cuda-dd-pml-ucx" "$osu/pt2pt/osu_latency" -d cuda D D
  run 40 "osu_bw-7.5.1-$tag-cuda-dd-pml-ucx" "$osu/pt2pt/osu_bw" -d cuda D D
  launch=("${base[@]}")
  if [ -n "$tests" ]; then
    say "nccl-tests 2.17.1 on the one GPU (-g 1, data checked: -c 1), one rank of the packed mpirun"
    launch=(mpirun -np 1 --allow-run-as-root --bind-to none)
    for t in all_reduce_perf all_gather_perf sendrecv_perf; do
      run 60 "$t-2.17.1-$tag-mpi" env NCCL_DEBUG=INFO "$tests/bin/$t" -b 8 -e 128M -f 2 -g 1
    done
    launch=("${base[@]}")
  fi
  say "under MPS: the two ranks' work on the one GPU without switching contexts"
  if [[ mps =~ ${ONLY:-.} ]] && command -v nvidia-cuda-mps-control; then
    export CUDA_MPS_PIPE_DIRECTORY=$work/mps CUDA_MPS_LOG_DIRECTORY=$work/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d && echo "MPS control daemon started"
    run 60 "osu_latency-7.5.1-$tag-cuda-dd-mps" "$osu/pt2pt/osu_latency" -d cuda D D
    run 40 "mpi-pingpong-$tag-ompi5-cuda-aware-mps" "$pingpong" -m cuda-aware -e 4M -n 20
    echo quit | nvidia-cuda-mps-control
    cat "$CUDA_MPS_LOG_DIRECTORY"/*.log 2>/dev/null | tail -5
  fi
  say "done"
  date -u
}

case ${1:-} in
  pack) pack "${2:?pack ENV TARBALL}" "${3:?pack ENV TARBALL}" ;;
  record)
    tarball=$(readlink -f "${2:?record TARBALL OUT}")
    out=${3:?record TARBALL OUT}
    if [ "${4:-}" = --dry-run ]; then  # the install tree bind-mounted over the original, in a private namespace
      mkdir -p "$out"
      root=$(tar -xJf "$tarball" -O stack.txt | awk '$1 == "root" {print $2}')
      exec unshare --mount --propagation private bash -c '
        set -e; d=$(mktemp -d); tar -C "$d" --anchored --exclude=syslib --exclude=stack.txt -xJf "$1"
        mount --bind "$d$2" "$2"
        exec bash "$0" record-in-place "$1" "$3" --dry-run' "$0" "$tarball" "$root" "$out"
    fi
    record "$tarball" "$out" 2>&1 | tee "$out/record.log" ;;
  record-in-place) mkdir -p "$3"; record "$2" "$3" --dry-run 2>&1 | tee "$3/record.log" ;;
  *) echo "usage: $0 pack ENV TARBALL | record TARBALL OUT [--dry-run]" >&2; exit 2 ;;
esac
