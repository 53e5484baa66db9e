"""mpi-pingpong (CPU mode) against OSU osu_latency: both a blocking ping-pong reporting half the
round trip, on the same machine and MPI, as job steps of one allocation of the local Slurm.

Each round runs both programs once with the same sizes, iterations and warm-up, back to back and
taking turns at going first, so that both see the same load on a shared machine. The ratio at a
size is the median over the rounds of that round's pingpong / osu: a round's pair shares its load,
so a slow minute of the machine moves both halves of a ratio, not one median. The table shows per
size each program's median, the ratio and the spreads (median absolute deviation / median) of
each program and of the ratio. Exit status 1 when |ratio - 1| > 5 % at a size >= 64 KiB, 2 when
it cannot run.

  bin/commstack venv && .venv/bin/python perf/pingpong_vs_osu.py \
      --osu-latency PREFIX/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency [--rounds 9]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from commstack.config import load_system
from commstack.errors import CommstackError
from commstack.tools.osu import parse_osu
from commstack.tools.mpi_pingpong import parse_pingpong
from commstack.run.launch import Allocation, Launcher, Step
from commstack.slurm.cluster import LocalSlurm

TOP = Path(__file__).resolve().parents[1]
OSU_PREFIX = os.environ.get("COMMSTACK_OSU_PREFIX")
JUDGED_FROM = 64 << 10
TOLERANCE = 0.05


def spread(values: list[float]) -> float:
    """Median absolute deviation over the median: the rounds' noise, robust to one bad round."""
    med = statistics.median(values)
    return statistics.median(abs(v - med) for v in values) / med


def measure(args, pingpong: str, work: Path) -> tuple[dict[int, list[float]], dict[int, list[float]], str]:
    """Latency in us per size over the rounds, for mpi-pingpong and for OSU; OSU's title."""
    n, w = str(args.iterations), str(args.warmup)
    pp_argv = [pingpong, "-m", "cpu", "-b", str(args.min), "-e", str(args.max), "-n", n, "-w", w]
    # -i and -x set OSU's small- and large-message counts alike: both programs get the same
    osu_argv = [args.osu_latency, "-m", f"{args.min}:{args.max}", "-i", n, "-x", w]
    pp_t: dict[int, list[float]] = {}
    osu_t: dict[int, list[float]] = {}
    title = ""
    cluster = LocalSlurm()
    cluster.start()
    try:
        system = load_system("local")
        with Allocation(system, cluster.variables, nodes=1, ntasks=2) as alloc:
            launcher = Launcher(system, "srun", cluster.variables, alloc)
            for r in range(args.rounds):
                runs = [("pp", pp_argv), ("osu", osu_argv)]
                for name, argv in runs if r % 2 == 0 else runs[::-1]:
                    out = launcher.run(Step(f"{name}{r}", argv, ntasks=2, timeout_s=600), work / f"{name}{r}").stdout
                    if name == "pp":
                        for row in parse_pingpong(out).rows:
                            pp_t.setdefault(row["size"], []).append(row["time_s"] * 1e6)
                    else:
                        sweep = parse_osu(out)[0]
                        title = sweep.title
                        for row in sweep.rows:
                            osu_t.setdefault(row["size"], []).append(row["latency_us"])
    finally:
        cluster.stop()  # our lease back; the last user stops it
    return pp_t, osu_t, title


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="commstack-pp-osu-") as work:  # nothing left in /tmp
        return measure_in(Path(work))


def measure_in(work: Path) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pingpong", help="mpi-pingpong binary (default: make in src/mpi-pingpong)")
    ap.add_argument("--osu-latency",
                    default=OSU_PREFIX and f"{OSU_PREFIX}/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency",
                    help="default: under $COMMSTACK_OSU_PREFIX")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--min", type=int, default=8)
    ap.add_argument("--max", type=int, default=4 << 20)
    args = ap.parse_args()
    if not args.osu_latency or not Path(args.osu_latency).is_file():
        print(f"no osu_latency at {args.osu_latency}: build OSU with the same MPI, and pass --osu-latency "
              "or set COMMSTACK_OSU_PREFIX", file=sys.stderr)
        return 2
    if args.max < JUDGED_FROM:
        print(f"--max {args.max}: the judged sizes start at {JUDGED_FROM}", file=sys.stderr)
        return 2
    pingpong = args.pingpong
    if not pingpong:
        pingpong = str(work / "mpi-pingpong")
        subprocess.run(["make", "-s", "-C", str(TOP / "src" / "mpi-pingpong"), "-B", f"OUT={pingpong}"], check=True)
    load = os.getloadavg()[0]
    try:
        pp_t, osu_t, title = measure(args, pingpong, work)
    except CommstackError as e:
        print(f"pingpong_vs_osu: {e}", file=sys.stderr)
        return 2

    print(f"mpi-pingpong vs {title}: 2 ranks on one node, local Slurm, {args.iterations} iterations + "
          f"{args.warmup} warm-up, medians of {args.rounds} alternating rounds")
    print(f"{'size (B)':>10} {'pingpong (us)':>14} {'osu (us)':>10} {'ratio':>7} {'pp spread':>10} "
          f"{'osu spread':>11} {'ratio spread':>13}")
    judged, off, missing = 0, [], []
    for size in sorted(set(pp_t) | set(osu_t)):
        if size not in pp_t or size not in osu_t:
            print(f"{size:>10}  only in {'mpi-pingpong' if size in pp_t else 'osu_latency'}'s output")
            missing.append(size)
            continue
        a, b = statistics.median(pp_t[size]), statistics.median(osu_t[size])
        ratios = [p / o for p, o in zip(pp_t[size], osu_t[size])]  # round by round
        ratio = statistics.median(ratios)
        flag = ""
        if size >= JUDGED_FROM:
            judged += 1
            if abs(ratio - 1) > TOLERANCE:
                flag = "  outside +-5%"
                off.append(size)
        print(f"{size:>10} {a:>14.2f} {b:>10.2f} {ratio:>7.3f} {spread(pp_t[size]):>9.1%} {spread(osu_t[size]):>10.1%} "
              f"{spread(ratios):>12.1%}{flag}")
    print(f"sizes >= 64 KiB within +-5% of osu_latency: {judged - len(off)}/{judged}")
    # the two ranks spin on their cores: anything else running moves the figures
    print(f"load average (1 min) before {load:.2f}, after {os.getloadavg()[0]:.2f}, on {os.cpu_count()} cores"
          + ("; the machine was busy: measure again on a quiet one" if load > 0.5 else ""))
    return 1 if off or missing or not judged else 0


if __name__ == "__main__":
    sys.exit(main())
