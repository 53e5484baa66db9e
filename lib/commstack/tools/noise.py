"""Known launcher and runtime lines (docs/harness.md#parsing-any-output-commstack-parse), each by the shape
its own source or documentation gives, with an example line from the corpus (tests/data/corpus) that the unit
tests match. A line that matches none is unknown; crash lines are never notes (commstack.tools.lines)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Pattern:
    source: str        # who prints it: open-mpi, intel-mpi, mpich, cray-mpich, mvapich, slurm, ucx, ...
    what: str          # what the line is, in a few words
    regex: re.Pattern  # matches the whole line (fullmatch)
    example: str       # a line of that kind, from the corpus or the source named in its index


@dataclass(frozen=True)
class Note:
    """A known line of an output that is not the benchmark's: kept in the result, never dropped."""

    line: str
    lineno: int
    source: str
    what: str

    def __str__(self) -> str:
        return f"line {self.lineno}: {self.source} ({self.what}): {self.line}"


def _p(source: str, what: str, regex: str, example: str) -> Pattern:
    return Pattern(source, what, re.compile(regex), example)


_HOST = r"\[[\w.-]+:\d+\]"  # Open MPI's [host:pid]
_IMPI_ID = r"\[-?\d+(?:#\d+@[\w.-]+)?\]"  # Intel MPI's [rank] or [rank#pid@host]
_UCX_TIME = r"\[\d+\.\d+\]"  # UCX's [seconds.microseconds]
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d"

PATTERNS: tuple[Pattern, ...] = (
    _p("open-mpi", "aggregated help messages",
       _HOST + r" \d+ more process(?:es)? ha(?:s|ve) sent help message \S+ / .+",
       "[lxbk1039:106838] 11 more processes have sent help message help-mpi-btl-openib.txt / ib port not selected"),
    _p("open-mpi", "aggregated help messages (PRRTE)",
       r"\d+ more process(?:es)? ha(?:s|ve) sent help message \S+ / .+",
       "2 more processes have sent help message help-accelerator-cuda.txt / cuMemHostRegister failed"),
    _p("open-mpi", "how to see every help message",
       _HOST + r' Set MCA parameter "\w+" to 0 to see all help / error messages',
       '[lxbk1039:106838] Set MCA parameter "orte_base_help_aggregate" to 0 to see all help / error messages'),
    _p("open-mpi", "--report-bindings", r"(?:" + _HOST + r" )?MCW rank \d+ (?:bound to .+|is not bound.*)",
       "MCW rank 0 bound to socket 0[core 0[hwt 0-1]]: [BB/../../../../../../../../../../../../../../../../..]"
       "[../../../../../../../../../../../../../../../../../..]"),
    _p("open-mpi", "--report-bindings (PRRTE)", _HOST + r" Rank \d+ bound to .+",
       "[node1:12345] Rank 0 bound to package[0][core:0]"),
    _p("open-mpi", "MCA component verbose line", _HOST + r" (?:\w+\.c:\d+ .+|mca: \w+: .+)",
       "[c36a-s39.ufhpc:252547] pml_ucx.c:313 connecting to proc. 8"),
    _p("open-mpi", "an environment variable set for the job (PRRTE)", _HOST + r" SET \w+=.*",
       "[b5302.betzy.sigma2.no:2889223] SET FI_PROVIDER=shm"),
    _p("open-mpi", "--display-map job map", r" (?:Data for JOB \[\d+,\d+\] offset \d+ Total slots allocated \d+"
       r"|=+ +JOB MAP +=+|Data for node: .+|\tProcess OMPI jobid: .+|=+)",
       " ========================   JOB MAP   ========================"),
    # `[<identifier>] <routine>(): <message>` (Intel MPI Developer Reference, I_MPI_DEBUG): the identifier is the
    # rank, or `rank#pid@host` with a `+` before the level; the routine is `MPI startup` or a function's name
    _p("intel-mpi", "I_MPI_DEBUG startup line", _IMPI_ID + r" MPI startup\(\): .*",
       "[0] MPI startup(): Intel(R) MPI Library, Version 5.1.3  Build 20160120 (build id: 14053)"),
    _p("intel-mpi", "I_MPI_DEBUG internal function line", _IMPI_ID + r" (?:\w+|DAPL startup)\(\): .*",
       "[1] MPID_nem_tmi_init(): pg=0x61e740, pg_rank=1"),
    _p("mpich", "Hydra proxy or mpiexec message", r"\[(?:proxy:\d+:\d+|mpiexec)@[\w.-]+\] .+",
       "[proxy:0:0@node1] got pmi command (from 0): init"),
    # Cray MPICH: its aborts are crash lines (lines.CRASH)
    _p("cray-mpich", "GPU transport layer (GTL) debug line", r"\(GTL DEBUG: \d+\) .+",
       "(GTL DEBUG: 1) cuIpcOpenMemHandle: invalid argument, CUDA_ERROR_INVALID_VALUE, line no 272"),
    _p("mvapich", "registration cache warning",
       r"WARNING: Error in initializing MVAPICH2 ptmalloc library\.\s*Continuing without InfiniBand registration cache "
       r"support\.",
       "WARNING: Error in initializing MVAPICH2 ptmalloc library.Continuing without InfiniBand registration cache "
       "support."),
    # Slurm: its errors are crash lines (lines.CRASH)
    _p("slurm", "srun, salloc or sbatch message", r"(?:srun|salloc|sbatch): (?!error: ).+",
       "srun: job 4123 queued and waiting for resources"),
    # ucs/debug/log.c: `[sec.usec] [host:pid:thread] file.c:line UCX LEVEL message` (ucs_info: UCX_LOG_LEVEL=info,
    # whose endpoint configuration lines are `ep_cfg[0]: tag(...)` to 1.14, `<context> self cfg#0 tag(...)` after)
    _p("ucx", "UCX log line", _UCX_TIME + r" \[[^\]]+\] +\S+:\d+ +UCX +(?:WARN|INFO|DIAG|DEBUG) .*",
       "[1738722441.247410] [3ccd0b10e5b5:8    :0]            sock.c:515  UCX  WARN  unable to read somaxconn "
       "value from /proc/sys/net/core/somaxconn file"),
    # ucs_log_print_compact: the same time and process, then the text (UCX_PROTO_INFO's tables, the lanes of an
    # endpoint); a line with a level after them is a log line above, or an error (CRASHES)
    _p("ucx", "UCX compact log line (protocol and lane tables)",
       _UCX_TIME + r" \[[^\]]+:\s*\d+\s*:[^\]]*\] {2,3}(?!\s*\S+:\d+ +UCX +[A-Z]+ )\S.*",
       "[1700000000.123456] [node1:12345:0]   | ucp_context_0 inter-node cfg#2 | tagged message by ucp_tag_send* "
       "from host memory |"),
    _p("libfabric", "libfabric log line",
       r"libfabric:[^<]*<(?:warn|info|debug|trace)> .*",
       "libfabric:core:core:fi_getinfo_():1002<warn> fi_getinfo: provider psm returned -61 (No data available)"),
    _p("nccl", "NCCL version line", r"[NR]CCL version \d+\.\d+\.\d+\+\S+(?: .*)?", "NCCL version 2.21.5+cuda11.8"),
    # src/debug.cc: `host:pid:tid ` then `[dev] NCCL INFO `, `[dev] file:line (func) NCCL WARN ` (2.2x; before it
    # no `(func)`), `NCCL CALL ` or `[dev] ms func:line NCCL TRACE `; NCCL_DEBUG_TIMESTAMP_LEVELS' stamp before it
    # (`[%F %T] ` by default, on WARN lines from 2.23). aws-ofi-nccl and the other plugins log through it
    _p("nccl", "NCCL_DEBUG line", r"(?:\[[^\]]*\] )?[^\s:]+:\d+:\d+ "
       r"(?:\[\d+\] (?:\S+:\d+ (?:\(\w*\) )?|\d+\.\d+ \S+:\d+ )?)?[NR]CCL (?:INFO|WARN|TRACE|CALL) .*",
       "server2:23920:24013 [7] NCCL INFO comm 0x7f5780001ca0 rank 15 nranks 32 cudaDev 7 nvmlDev 7 - Init COMPLETE"),
    _p("ssh", "known-hosts warning", r"Warning: Permanently added '[^']+' \([\w-]+\) to the list of known hosts\.",
       "Warning: Permanently added 'compute-st-c6gn16xlarge-2,172.31.27.158' (ECDSA) to the list of known hosts."),
    _p("x11", "X11 forwarding message", r"(?:X11 connection rejected because of wrong authentication\.|Authorization "
       r"required, but no authorization protocol specified|/usr/bin/xauth: .+)",
       "Authorization required, but no authorization protocol specified"),
    _p("shell", "set -x trace line", r"\++ \S.*", "+ echo '=== osu_latency ==='"),
    _p("shell", "prompt and command line", r"\$ \S.*", "$ srun -N1 -n2 osu_bw"),
    _p("shell", "banner line", r"(?:#{2,}(?: .*)?|(?P<r>={3,}|-{3,}|\*{3,}) \S.*? (?P=r))", "=== osu_latency ==="),
    _p("shell", "date line", _DAY + r" \d\d:\d\d:\d\d(?: [A-Z]{2,5})? \d{4}", "Tue Nov 14 09:12:01 MST 2023"),
    _p("shell", "job-script banner (seed 004)", r"Nodes:\d+ Tasks:\d+ Per Node:\d+", "Nodes:2 Tasks:2 Per Node:1"),
    # the `time` keyword of bash (real/user/sys, `%dm%.3fs`), POSIX `time -p` (`real 7.90`), GNU time's
    # default two lines: a job script's trailer (tests/data/corpus/jobs/*-time.out)
    _p("shell", "bash `time` line", r"(?:real|user|sys)\t\d+m\d+\.\d+s", "real\t0m7.902s"),
    _p("shell", "`time -p` line", r"(?:real|user|sys) \d+\.\d+", "real 7.90"),
    _p("shell", "GNU time line", r"\d+\.\d+user \d+\.\d+system (?:\d+:)+\d+\.\d+elapsed \d+%CPU \(.*"
       r"|\d+inputs\+\d+outputs \(\d+major\+\d+minor\)pagefaults \d+swaps",
       "0.41user 0.08system 0:01.52elapsed 32%CPU (0avgtext+0avgdata 24576maxresident)k"),
    _p("lmod", "module swapped for another", r"Lmod is automatically replacing \S+ with \S+\.?",
       'Lmod is automatically replacing "gnu/9.3.0" with "intel/19.1.3".'),
    _p("lmod", "modules reloaded or inactive", r"The following have been (?:reloaded with a version change|"
       r"reloaded|inactivated|activated)?:?|Due to MODULEPATH changes, the following have been reloaded:"
       r"|Inactive Modules:",
       "Due to MODULEPATH changes, the following have been reloaded:"),
    # `module list` (Lmod's cmdfuncs.lua List, Environment Modules' the same): its head, then its entries in
    # columns, each `%3d) name` (MT.lua list_w_property) with its properties `(g)`, then their legend
    _p("lmod", "module list head", r"Currently Loaded (?:Modules|Modulefiles)(?: Matching: .+|:)|No modules loaded",
       "Currently Loaded Modules:"),
    _p("lmod", "module list entries", r"(?: *\d+\) [^\s()]+(?:\([^)\s]*\))?(?: => \S+)?(?: +\([\w:,]+\))?)+ *",
       " 10) libfabric/1.19.0-GCCcore-13.2.0"),
    _p("lmod", "module list legend", r"  Where:|   \w{1,3}:  \S.*", "   g:  built for GPU"),
    # EasyBuild's print_msg (`== ` before each message) and EESSI's init script, sourced by a job script
    _p("easybuild", "EasyBuild message", r"== \S.*",
       "== Temporary log file in case of crash /tmp/eb-1a2b3c/easybuild-4d5e6f.log"),
    _p("eessi", "EESSI init message", r"Found EESSI (?:pilot )?repo @ \S+!|archdetect says \S+"
       r"|archdetect could not detect any accelerators|Using \S+ as (?:the )?\S.*\.|Found Lmod \S+ file at \S+"
       r"|Found libcurl CAs file at .+|Initializing Lmod\.\.\.|Prepending (?:site path )?\S+ to \$MODULEPATH\.\.\."
       r"|Environment set up to use EESSI .+, have fun!|EESSI/\S+ loaded successfully",
       "Environment set up to use EESSI (2023.06), have fun!"),
    _p("modules", "module load message", r"Loading (?:requirement: )?[\w.+-]+(?:/[\w.+-]+)*",
       "Loading mpi/hpcx"),
)

#: known text with a known end, also where it is glued to the start or end of another line (no newline
#: after it), which then still counts: matched anywhere in a line (finditer), taken out of it
GLUED: tuple[Pattern, ...] = (
    _p("loader", "a shared library's version warning",
       # a program path glued after a unit (`Messages/s/usr/...`) starts at its own `/`, not at the unit's
       # (nor from nccl-tests' N/A: a path glued after it starts after it)
       r"(?:(?<!\S)\.{1,2})?(?<!N)/(?!s/)[^\s()]*: (?:\.{1,2})?/[^\s()]*: no version information available "
       r"\(required by /[^\s()]*\)",
       "/nccl-tests-2.17.1/build/all_reduce_perf: /usr/lib/aarch64-linux-gnu/libnl-3.so.200: no version information "
       "available (required by /usr/lib64/libcxi.so.1)"),
    # OSU 6.2-7.4's memory-limit warning has no newline: it always glues onto the next line (2>&1); 6.2's
    # names no size
    _p("osu", "memory limit warning", r"Warning! Limiting max message size(?: to: ?(?P<limit>\d+))?\.? ?"
       r"Increase -M, --mem-limit for higher message sizes\.",
       "Warning! Limiting max message size to: 1048576. Increase -M, --mem-limit for higher message sizes."),
    # OSU 5.x-7.4's -M below 1 MiB (set_max_memlimit): each rank prints it to stderr without a newline
    _p("osu", "memory limit raised to 1 MiB", r"(?:Requested memory limit too low, using \[\d+\] instead\.)+",
       "Requested memory limit too low, using [1048576] instead.Requested memory limit too low, using [1048576] "
       "instead."),
    # rccl-tests on MI300 print it without a newline, glued to the version line
    _p("rccl", "FP8 types message", r"On gfx\w+ architecture, using FNUZ FP8 types",
       "On gfx942 architecture, using FNUZ FP8 types"),
    # printed by the X library without a newline, once per connection attempt
    _p("x11", "X11 authentication failure", r"Invalid MIT-MAGIC-COOKIE-1 key", "Invalid MIT-MAGIC-COOKIE-1 key"),
)

#: crash lines that a tool's parser tells inside its table (ucx_perftest: UCX's ERROR and fatal lines), known
#: here for an output that holds no title at all: its kind is crashed, quoting the first one
#: (commstack.results.parse; issue 35); never a note, also before or after a table (results.tables)
CRASHES: tuple[Pattern, ...] = (
    _p("ucx", "UCX error log line", r"\[\d+\.\d+\] \[[^\]]+\] +\S+:\d+ +UCX +(?:ERROR|FATAL) .*",
       "[1795498764.937797] [vm:7107 :0]        perftest.c:405  UCX  ERROR client failed. connect() failed: "
       "Connection refused"),
    _p("ucx", "UCX fatal error (a local protection or retry error, then a backtrace)",
       r"\[[\w.-]+:\d+ *:\d+:\d+\] +\S+:\d+ +.*",
       "[gpu-01:12345:0:12345] ib_mlx5_log.c:177  Local protection on mlx5_0:1/IB (synd 0x4 vend 0x56 hw_synd 0/0)"),
)


#: per-line prefixes that launchers add: the rest of the line is the program's own
# prterun (PRRTE 3) writes a NUL byte after each help message it forwards: it begins the next line.
# Stripped like a prefix, and a note of its line (commstack.tools.lines.own_lines)
PRRTE_NUL = _p("open-mpi", "NUL byte after a help message (PRRTE)", r"\x00+",
               "\x001 more process has sent help message help-accelerator-cuda.txt / cuMemHostRegister failed")
PREFIXES: tuple[Pattern, ...] = (
    PRRTE_NUL,
    _p("open-mpi", "--tag-output / --output tag prefix", r"\[\d+,\d+\]<(?:stdout|stderr|stddiag)>: ?",
       "[1,0]<stdout>:# OSU MPI Latency Test v7.1"),
    # src/api/step_io.c _write_label: `%*d: `, the task id padded to the width of the largest (` 0: ` of 16
    # tasks), `P%u %*d: ` in a heterogeneous job
    _p("slurm", "srun --label prefix", r"(?:P\d+ )? *\d+:(?: |$)", " 0: # OSU MPI Latency Test v5.3"),
    # SkyPilot (sky/skylet: run_bash_command_with_log; its Go sky-exec: ip before pid): each node's output after
    # `(node, rank=N, pid=P[, ip=A]) `, `(task, pid=P) ` on one node, `(setup pid=P[, ip=A]) `, in cyan where the
    # terminal took colours
    _p("skypilot", "node and rank prefix",
       r"(?:\x1b\[\d+m)?\((?:setup |[\w.-]+, (?:rank=\d+, )?)(?:ip=[\d.:a-f]+, )?pid=\d+(?:, ip=[\d.:a-f]+)?\)"
       r"(?:\x1b\[0m)?(?: |$)",
       "(head, rank=0, pid=2178) # nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5"),
    # `kubectl logs --timestamps`: each line after its RFC 3339 time
    _p("kubernetes", "kubectl logs --timestamps prefix",
       r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)(?: |$)",
       "2025-03-04T10:12:01.123456789Z # OSU MPI Bandwidth Test v7.4"),
)

#: rule lines that open and close a block of text: the block's lines are the frame's
FRAMES: tuple[Pattern, ...] = (
    _p("open-mpi", "help box", r"-{74}", "-" * 74),
    _p("mpich", "Hydra termination box", r"={79,83}", "=" * 83),
    _p("shell", "banner box", r"#{20,}|={20,}|\*{20,}", "#" * 45),
)
FRAME_MAX_LINES = 60  # a help box longer than this is no box: its lines are looked at one by one
# a benchmark's own line: a frame around one is no frame (a job script's rules around a table)
_BENCHMARK_LINE = re.compile(r"\s*\d+\s+[-+\d.]|# (?:OSU |Collective test |nThread |nccl-tests )")


def strip_prefix(line: str) -> tuple[str, Pattern | None]:
    """The line without a launcher's prefix, and that prefix's pattern (None where there is none)."""
    m, p = next(((m, p) for p in PREFIXES if (m := p.regex.match(line))), (None, None))
    return (line[m.end():], p) if m else (line, None)


def classify(line: str, patterns: tuple[Pattern, ...] = PATTERNS) -> Pattern | None:
    """The first of `patterns` that a whole line matches (its trailing blanks ignored), or None."""
    text = line.rstrip()
    return next((p for p in patterns if p.regex.fullmatch(text)), None)


def framed(lines: list[str]) -> dict[int, Pattern]:
    """Index (0-based) -> frame of every line inside or on a frame: a rule line, the lines up to the
    same rule line at most FRAME_MAX_LINES later, and that closing line; none around a benchmark's own
    line. Open MPI prints two boxes back to back (a closing rule, then an opening one): each pairs with
    its own."""
    out: dict[int, Pattern] = {}
    i = 0
    while i < len(lines):
        text = lines[i].rstrip()
        frame = classify(text, FRAMES)
        if frame is not None and i not in out:
            end = next((j for j in range(i + 1, min(len(lines), i + 1 + FRAME_MAX_LINES))
                        if lines[j].rstrip() == text), None)
            if end is not None and not any(_BENCHMARK_LINE.match(lines[k]) for k in range(i + 1, end)):
                out.update((k, frame) for k in range(i, end + 1))
                i = end + 1
                continue
        i += 1
    return out
