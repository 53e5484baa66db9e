"""mpi-pingpong (CPU mode) against OSU osu_latency: both a blocking ping-pong reporting half the
round trip, on the same machine and MPI, as job steps of one allocation of the local Slurm.

Each round runs both programs once with the same sizes, iterations and warm-up; the table shows
the median over the rounds and the ratio pingpong / osu per size. Target: |ratio - 1| <= 5 % for
sizes >= 64 KiB.

  bin/commstack venv && .venv/bin/python perf/pingpong_vs_osu.py \
      --pingpong PATH --osu-latency PATH [--rounds 5]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from commstack.run.launch import Allocation, Launcher, Step
from commstack.slurm import LocalSlurm
from commstack.results.parse import parse_osu, parse_pingpong
from commstack.config import load_system

TOP = Path(__file__).resolve().parents[1]
OSU = "/opt/osu-micro-benchmarks/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pingpong", help="mpi-pingpong binary (default: make in src/mpi-pingpong)")
    ap.add_argument("--osu-latency", default=OSU)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--max", type=int, default=4 << 20)
    args = ap.parse_args()
    if not Path(args.osu_latency).is_file():
        print(f"no osu_latency at {args.osu_latency}: build OSU with the same MPI, or pass --osu-latency", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="commstack-pp-osu-"))
    pingpong = args.pingpong
    if not pingpong:
        pingpong = str(work / "mpi-pingpong")
        subprocess.run(["make", "-s", "-C", str(TOP / "src" / "mpi-pingpong"), "-B", f"OUT={pingpong}"], check=True)
    cluster = LocalSlurm()
    cluster.start()
    system = load_system("local")
    n, w = str(args.iterations), str(args.warmup)
    pp_argv = [pingpong, "-m", "cpu", "-b", "8", "-e", str(args.max), "-n", n, "-w", w]
    # OSU runs its own large-message iteration count above 8 KiB unless told: give both the same
    osu_argv = [args.osu_latency, "-m", f"8:{args.max}", "-i", n, "-x", w]
    pp_t, osu_t = {}, {}
    try:
        with Allocation(system, cluster.env, nodes=1, ntasks=2) as alloc:
            launcher = Launcher(system, "srun", cluster.env, alloc)
            for r in range(args.rounds):
                pp = parse_pingpong(launcher.run(Step(f"pp{r}", pp_argv, ntasks=2, timeout_s=600), work / f"pp{r}").stdout)
                osu = parse_osu(launcher.run(Step(f"osu{r}", osu_argv, ntasks=2, timeout_s=600), work / f"osu{r}").stdout)[0]
                for row in pp.rows:
                    pp_t.setdefault(row["size"], []).append(row["time_s"] * 1e6)
                for row in osu.rows:
                    osu_t.setdefault(row["size"], []).append(row["latency_us"])
    finally:
        cluster.stop()  # our lease back; the last user stops it
    print(f"mpi-pingpong vs {osu.title}: 2 ranks on one node, local Slurm, "
          f"{args.iterations} iterations + {args.warmup} warm-up, median of {args.rounds} rounds")
    print(f"{'size (B)':>10} {'pingpong (us)':>14} {'osu (us)':>10} {'ratio':>7}")
    off = []
    for size in sorted(set(pp_t) & set(osu_t)):
        a, b = statistics.median(pp_t[size]), statistics.median(osu_t[size])
        ratio = a / b
        flag = ""
        if size >= 64 << 10 and abs(ratio - 1) > 0.05:
            flag = "  outside +-5%"
            off.append(size)
        print(f"{size:>10} {a:>14.2f} {b:>10.2f} {ratio:>7.3f}{flag}")
    big = [s for s in pp_t if s >= 64 << 10]
    print(f"sizes >= 64 KiB within +-5%: {len(big) - len(off)}/{len(big)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
