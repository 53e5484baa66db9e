#!/usr/bin/env bash
# Records the runtime diagnostics of issue 47 that can be had here: OSU 7.2 under Debian 12's Open MPI 4.1.4 with
# its UCX pml (UCX 1.13.1, no RDMA device: pml_ucx_tls/devices any) at UCX_LOG_LEVEL=info, whose protocol tables
# (UCX_PROTO_ENABLE=y UCX_PROTO_INFO=y) come when a size first needs a protocol: between the rows; the same with
# mpirun --tag-output, a prefix on every line. The output is stdout and stderr together, as a job log holds them.
# Usage: OSU_PREFIX=/opt/omb72 tests/data/corpus/record-runtime.sh   (writes into tests/data/corpus/)
set -uo pipefail
corpus=$(cd "$(dirname "$0")" && pwd)
osu=${OSU_PREFIX:?OSU_PREFIX: an OSU 7.2 install}/libexec/osu-micro-benchmarks/mpi/pt2pt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export UCX_LOG_LEVEL=info UCX_PROTO_ENABLE=y UCX_PROTO_INFO=y
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any
        -x UCX_LOG_LEVEL -x UCX_PROTO_ENABLE -x UCX_PROTO_INFO -n 2)

record() {  # record NAME ARGV...
  local out=$corpus/$1
  shift
  (cd "$work" && "$@") >"$out" 2>&1
  echo "recorded $out ($(wc -l <"$out") lines)"
}

record osu7/osu_bw-7.2-ucx-proto-info-inside.out "${mpirun[@]}" "$osu/osu_bw" -m 1:1048576 -i 100 -x 10
record osu7/osu_bibw-7.2-ucx-info-tag-output.out "${mpirun[@]}" --tag-output "$osu/osu_bibw" -m 1:1048576 -i 100 -x 10
