#!/usr/bin/env bash
# Records the CUDA-aware stack that this repository's Spack recipes built (envs/x86-ompi: Open MPI 5.0.8 +cuda,
# PMIx, PRRTE, hwloc, UCX 1.19.0 +cuda +gdrcopy, Libfabric, GDRCopy, mpi-pingpong, OSU 7.5.1 +cuda) moving GPU
# buffers on a machine lent to a session (one GPU, root, no network, its own driver, no Spack).
#   pack TARBALL         (here, where Spack built the stack) copies the install prefixes (no headers, man pages
#                        or static archives, debug info stripped from the copies), libcudart.so.12 of the CUDA
#                        they were built against, and the Debian libraries they need that are not glibc into
#                        TARBALL (tar.xz): the binaries' RPATHs name those absolute prefixes, so they are
#                        unpacked at the same paths there.
#   record TARBALL OUT   (on the GPU machine) unpacks it, prints what Open MPI and UCX say of CUDA, and runs,
#                        2 ranks on the one GPU under the packed mpirun, mpi-pingpong's three modes and OSU
#                        with device buffers; each output stdout and stderr together, bytes as printed, in
#                        OUT/recorded.tar (re-packed after each run, so that a run cut by a time limit still
#                        brings back what was recorded before it); OUT/record.log says what ran. ONLY=REGEX
#                        runs only the runs whose output name matches (the probes always).
# --dry-run after record: the same on a machine without a GPU, the prefixes bind-mounted in a private mount
# namespace (unshare) instead of unpacked over /opt, to see that every library resolves before device time.
set -uo pipefail
ROOT=/opt/spack/opt/spack/linux-x86_64_v3
CUDA=/opt/commstack/cuda-12.8.1
PREFIXES=(openmpi-5.0.8-ito3gsctqwlcwk3n4fieyllkelrppfnb pmix-5.0.8-7fyqkxqaqfid66uuqpncakw3nfjznvxz
          prrte-3.0.11-5ghbzoebzxyue3sdlw4egf7gqexhnj7o hwloc-2.12.2-lbjiy7d6kjoqhbmebzfl4b72a4j6olrj
          ucx-1.19.0-o2qvuesncnkvpjsittyphg4dndoidqek libfabric-1.22.0-z4weiaive77xyy5endjcxjlrtkvxhiz3
          gdrcopy-2.5.1-idba5hlma7ve7k3x5r34g3rgteaen7h2 mpi-pingpong-1.2-54m4dsxfgf3h4l464yo5wgb7ibl3ouru
          osu-micro-benchmarks-7.5.1-xums2nkvm7ntkyea3z3dhrnlsypxfbdd
          gcc-runtime-12.2.0-iwxnaxbhxccri5qsyservt72f3r7n4ak)
# glibc's and the compiler's own libraries (gcc-runtime's come by RPATH) and the driver's: the GPU machine has its own
NOT_PACKED='^(libc|libm|libstdc\+\+|libgcc_s|libdl|libpthread|librt|libresolv|ld-linux-x86-64|libcuda|libnvidia-ml|linux-vdso)\.so'

say() { printf '\n== %s\n' "$*"; }
elves() { find "$@" -type f -exec sh -c 'for f; do head -c4 "$f" | grep -q ELF && echo "$f"; done' sh {} +; }

pack() {
  local tarball=$1 stage lib dep
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir -p "$stage/$ROOT" "$stage/$CUDA/lib64" "$stage/syslib"
  for p in "${PREFIXES[@]}"; do
    cp -a "$ROOT/$p" "$stage/$ROOT/"
    rm -rf "$stage/$ROOT/$p"/{include,share/man,share/doc,.spack/archived-files}
    find "$stage/$ROOT/$p" \( -name '*.a' -o -name '*.la' -o -name 'lib[alt]san.so*' -o -name 'libubsan.so*' \) \
      -delete
  done
  cp -a "$CUDA/lib64/libcudart.so.12" "$stage/$CUDA/lib64/"
  ln -s lib64 "$stage/$CUDA/lib"
  elves "$stage/$ROOT" "$stage/$CUDA" | xargs strip --strip-debug
  # the system libraries they load, and what those load in turn (ldd resolves the closure)
  elves "${PREFIXES[@]/#/$ROOT/}" "$CUDA/lib64/libcudart.so.12" | xargs -n1 ldd 2>/dev/null |
    awk '$2 == "=>" && $3 ~ "^/(usr/)?lib/" {print $1, $3}' | sort -u | while read -r lib dep; do
      [[ $lib =~ $NOT_PACKED ]] || cp -L "$dep" "$stage/syslib/$lib"
    done
  strip --strip-debug "$stage"/syslib/*
  ls -l "$stage/syslib"
  du -sh "$stage"/{opt,syslib}
  tar -C "$stage" -cf - opt syslib | xz -T0 -6 >"$tarball.part" && mv "$tarball.part" "$tarball"
  ls -l "$tarball"
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
  if [ "$dry" = --dry-run ]; then
    tar -C "$work" -xJf "$tarball"
  else
    [ ! -e "$ROOT/${PREFIXES[0]}" ] || { echo "$ROOT/${PREFIXES[0]} exists already: not unpacking over it"; return 1; }
    tar -C / -xJf "$tarball" opt && tar -C "$work" -xJf "$tarball" syslib || return 1
  fi
  libcuda=$(ldconfig -p | awk '/libcuda\.so\.1 / {print $NF; exit}')
  for d in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [ -n "$libcuda" ] || [ ! -e "$d/libcuda.so.1" ] || libcuda=$d/libcuda.so.1
  done
  [ "$dry" != --dry-run ] || libcuda=$CUDA/lib64/stubs/no-driver/libcuda.so.1
  echo "libcuda: ${libcuda:-none found}"
  export LD_LIBRARY_PATH=${libcuda:+$(dirname "$libcuda"):}$work/syslib
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  ompi=$ROOT/${PREFIXES[0]} ucx=$ROOT/${PREFIXES[4]} osu=$ROOT/${PREFIXES[8]}/libexec/osu-micro-benchmarks/mpi
  pingpong=$ROOT/${PREFIXES[7]}/bin/mpi-pingpong
  export PATH=$ompi/bin:$ucx/bin:$PATH:/usr/local/nvidia/bin

  say "libraries (nothing may be missing; where each resolves)"
  missing=$(elves "$ROOT" "$CUDA/lib64" | xargs -n1 ldd 2>&1 | grep -E 'not found' | sort | uniq -c)
  echo "${missing:-none missing}"
  ldd "$osu/pt2pt/osu_bw" "$ucx/lib/ucx/libuct_cuda.so.0" "$ompi/lib/openmpi/mca_accelerator_cuda.so" |
    grep -E '=>' | awk '{print $1, $3}' | sort -u

  say "what Open MPI and UCX say of CUDA"
  probe() { echo "\$ $*"; "$@" >"$work/rec/$name.out" 2>&1; echo "exit $? -> $name.out"; pack_out; }
  name=ompi_info-cuda-$gpu probe sh -c 'ompi_info --parsable --all | grep -E "cuda|accelerator"'
  name=ucx_info-v-$gpu probe ucx_info -v
  name=ucx_info-d-$gpu probe ucx_info -d
  cat "$work/rec/ucx_info-v-$gpu.out"
  grep -i -A2 -E 'transport: *(cuda|gdr)' "$work/rec/ucx_info-d-$gpu.out" || echo "ucx_info -d names no CUDA transport"
  grep -E 'mpi_built_with_cuda_support:value|opal_cuda_support:value|:(accelerator|btl|coll):[a-z]*cuda:version:"comp' \
    "$work/rec/ompi_info-cuda-$gpu.out"

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
  run 40 pml-selection-$gpu --mca pml_base_verbose 10 --mca pml_ucx_verbose 10 "$osu/pt2pt/osu_latency" \
    -d cuda -m 8:8 D D
  say "mpi-pingpong, the three modes"
  for mode in cpu staged cuda-aware; do
    run 40 "mpi-pingpong-$gpu-ompi5-$mode" "$pingpong" -m "$mode" -e 4M -n 20
  done
  # two ranks on one GPU: 160 us a message (OSU's latency) on the H200 (2026-11-27): 10000 iterations a size
  # need about a minute, and with -c (a device kernel and a check around each) 100 iterations a size
  say "OSU 7.5.1, device buffers"
  run 100 "osu_latency-7.5.1-$gpu-cuda-dd" "$osu/pt2pt/osu_latency" -d cuda D D
  run 40 "osu_bw-7.5.1-$gpu-cuda-dd" "$osu/pt2pt/osu_bw" -d cuda D D
  run 60 "osu_latency-7.5.1-$gpu-cuda-dd-validation-i100" "$osu/pt2pt/osu_latency" -c -i 100 -x 10 -d cuda D D
  run 40 "osu_allreduce-7.5.1-$gpu-cuda-validation" "$osu/collective/osu_allreduce" -c -d cuda
  run 40 "osu_bw-7.5.1-$gpu-cuda-dd-validation" "$osu/pt2pt/osu_bw" -c -d cuda D D
  say "OSU through UCX's PML, its CUDA transports allowed"
  launch+=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any)
  run 100 "osu_latency-7.5.1-$gpu-cuda-dd-pml-ucx" "$osu/pt2pt/osu_latency" -d cuda D D
  run 40 "osu_bw-7.5.1-$gpu-cuda-dd-pml-ucx" "$osu/pt2pt/osu_bw" -d cuda D D
  launch=("${base[@]}")
  say "under MPS: the two ranks' work on the one GPU without switching contexts"
  if [[ mps =~ ${ONLY:-.} ]] && command -v nvidia-cuda-mps-control; then
    export CUDA_MPS_PIPE_DIRECTORY=$work/mps CUDA_MPS_LOG_DIRECTORY=$work/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d && echo "MPS control daemon started"
    run 60 "osu_latency-7.5.1-$gpu-cuda-dd-mps" "$osu/pt2pt/osu_latency" -d cuda D D
    run 40 "mpi-pingpong-$gpu-ompi5-cuda-aware-mps" "$pingpong" -m cuda-aware -e 4M -n 20
    echo quit | nvidia-cuda-mps-control
    cat "$CUDA_MPS_LOG_DIRECTORY"/*.log 2>/dev/null | tail -5
  fi
  say "done"
  date -u
}

case ${1:-} in
  pack) pack "${2:?pack TARBALL}" ;;
  record)
    tarball=$(readlink -f "${2:?record TARBALL OUT}")
    out=${3:?record TARBALL OUT}
    if [ "${4:-}" = --dry-run ]; then  # prefixes bind-mounted over the originals, in a private namespace
      mkdir -p "$out"
      exec unshare --mount --propagation private bash -c '
        set -e; d=$(mktemp -d); tar -C "$d" -xJf "$1" opt
        mount --bind "$d'"$ROOT"'" '"$ROOT"'
        exec bash "$0" record-in-place "$@"' "$0" "$tarball" "$out" --dry-run
    fi
    record "$tarball" "$out" 2>&1 | tee "$out/record.log" ;;
  record-in-place) mkdir -p "$3"; record "$2" "$3" --dry-run 2>&1 | tee "$3/record.log" ;;
  *) echo "usage: $0 pack TARBALL | record TARBALL OUT [--dry-run]" >&2; exit 2 ;;
esac
