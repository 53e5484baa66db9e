#!/usr/bin/env bash
# Records the job logs of issue 35 that can be had here: real runs of Debian 12's ucx_perftest (ucx-utils
# 1.13.1) and fi_pingpong (libfabric-bin 1.17.0) on loopback, and of OSU 7.2 under Open MPI's mpirun
# (OSU_PREFIX, e.g. /opt/omb72), each inside a job script as sites write them: its own echo, Lmod's
# messages (echoed as Lmod prints them: no Lmod here), `set -x`, bash's `time`, a wrapper's lines and
# counters after the run. The job log is the script's stdout and stderr together, as Slurm writes it.
# Usage: OSU_PREFIX=/opt/omb72 tests/data/corpus/record-joblogs.sh   (writes into tests/data/corpus/)
set -uo pipefail
corpus=$(cd "$(dirname "$0")" && pwd)
osu=${OSU_PREFIX:?OSU_PREFIX: an OSU 7.2 install}/libexec/osu-micro-benchmarks/mpi
mpirun=(mpirun --allow-run-as-root --oversubscribe)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

preamble() {  # what a site's job script prints before its benchmark
  echo "Job 4242 on $(hostname), $(date -u '+%a %b %e %H:%M:%S UTC %Y')"
  echo "Lmod is automatically replacing \"gcc/12.2.0\" with \"gcc/13.2.0\"."
  echo "Loading mpi/hpcx"
  echo "Number of nodes: 1"
  echo "UCX_TLS=${UCX_TLS:-(unset)}"
}

record() {  # record NAME SCRIPT: the job log of SCRIPT (bash, sourcing the functions above)
  local out=$corpus/$1
  shift
  (cd "$work" && bash -c "$(declare -f preamble); $*") >"$out" 2>&1
  echo "recorded $out ($(wc -l <"$out") lines)"
}

# ------------------------------------------------------------------ ucx_perftest, its own output alone
record ucx_perftest/ucx_perftest-1.13-loopback-tag_lat-joblog.out \
  'preamble; time ucx_perftest -l -t tag_lat -s 8 -n 20000; echo "Done."'
record ucx_perftest/ucx_perftest-1.13-loopback-tag_bw-progress.out \
  'ucx_perftest -l -t tag_bw -s 1048576 -n 60000'
record ucx_perftest/ucx_perftest-1.13-loopback-final-only.out \
  'ucx_perftest -l -f -t tag_lat -s 4096 -n 5000'
record ucx_perftest/ucx_perftest-1.13-loopback-tag_bw-killed.out \
  'preamble; time timeout -s KILL 2 ucx_perftest -l -t tag_bw -s 1048576 -n 100000000; echo "exit status $?"'
record ucx_perftest/ucx_perftest-1.13-no-server-joblog.out \
  'preamble; echo "Starting client..."; time ucx_perftest 127.0.0.1 -p 13499 -t tag_lat -s 8 -n 1000; echo "exit status $?"'

# ------------------------------------------------------------------ fi_pingpong over udp's datagram endpoint
record fi_pingpong/fi_pingpong-1.17-udp-dgram-wrapper.out '
  echo "Starting server..."; fi_pingpong -p udp -B 47791 >/dev/null 2>&1 & sleep 1
  echo "Localhost fi_pingpong test: Attempt 1 (max 3)..."
  echo "[rank 0] Running: /usr/bin/fi_pingpong -p udp -P 47791 127.0.0.1"
  fi_pingpong -p udp -P 47791 127.0.0.1 && echo "fi_pingpong: SUCCESS!"; wait'
record fi_pingpong/fi_pingpong-1.17-udp-dgram-S-all-time.out '
  preamble; fi_pingpong -p udp -S all -I 20 -B 47792 >/dev/null 2>&1 & sleep 1
  time fi_pingpong -p udp -S all -I 20 -P 47792 127.0.0.1; wait'
record fi_pingpong/fi_pingpong-1.17-udp-dgram-S-all-killed.out '
  preamble; fi_pingpong -p udp -S all -I 20000 -B 47793 >/dev/null 2>&1 & sleep 1
  timeout -s KILL 1 fi_pingpong -p udp -S all -I 20000 -P 47793 127.0.0.1; echo "exit status $?"; kill %1; wait'
record fi_pingpong/fi_pingpong-1.17-tcp-rdm-time.out '
  preamble; fi_pingpong -p tcp -e rdm -B 47794 >/dev/null 2>&1 & sleep 1
  time fi_pingpong -p tcp -e rdm -P 47794 127.0.0.1; wait'

# ------------------------------------------------------------------ OSU 7.2 under mpirun in a job script
counters() {  # a script's counters after the run: the loopback device's, as sites print their NIC's
  echo "lo tx_bytes $(cat /sys/class/net/lo/statistics/tx_bytes) rx_bytes $(cat /sys/class/net/lo/statistics/rx_bytes)"
}
record osu7/osu_latency-7.2-joblog-lmod-time.out \
  "preamble; set -x; time ${mpirun[*]} -n 2 $osu/pt2pt/osu_latency -m 1:4096; set +x; echo Done."
record osu7/osu_mbw_mr-7.2-joblog-counters.out \
  "$(declare -f counters); preamble; ${mpirun[*]} -n 2 $osu/pt2pt/osu_mbw_mr -m 1:65536; counters"
record osu7/osu_multi_lat-7.2-joblog-counters.out \
  "$(declare -f counters); preamble; ${mpirun[*]} -n 2 $osu/pt2pt/osu_multi_lat -m 1:65536; counters"
record osu7/osu_bw-7.2-joblog-killed.out \
  "preamble; time timeout -s KILL 3 ${mpirun[*]} -n 2 $osu/pt2pt/osu_bw -i 200000 -x 10; echo \"exit status \$?\""
record osu7/osu-7.2-joblog-segfault-before-title.out \
  "preamble; ${mpirun[*]} -n 2 bash -c 'kill -SEGV \$\$'; echo \"exit status \$?\""
