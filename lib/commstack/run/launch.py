"""Launch benchmark steps: srun job steps inside one allocation per session, or mpirun when asked. Each step's
output goes to its own directory as it comes, with its command line and variables, before anything is judged, and a
step that did not run to its end raises the LaunchError that names why
(docs/harness.md#what-a-step-may-print-and-leave-behind).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import secrets
import shlex
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from commstack.config import System
from commstack.errors import (AllocationLostError, BinaryNotFoundError, ControllerLostError, LaunchError,
                              NodeFailureError, PairFailedError, SlurmUnavailableError, SrunError, StepCrashedError,
                              StepTimeoutError, cut)
from commstack.files import FileWriteError, write_atomic, write_json
from commstack.run import pair
from commstack.run.capture import Sink, output_limit, output_too_large, pump, stop
from commstack.slurm.clients import client, executable
from commstack.slurm.procs import REAPER, orphans, sweep

#: the token that marks every process of a step (its environment), for the sweep at its end
STEP_TOKEN = "COMMSTACK_STEP"
#: loader variables: the facts probe gets none of them in its arguments
LOADER = re.compile(r"LD_[A-Z_]+")
#: the variable the facts probe gets in its environment (its `ldd` of the benchmark needs it to find the MPI)
SEARCH_PATH = ("LD_LIBRARY_PATH",)
#: one GPU per local rank (gpu_binding: localid); the wrapper runs on the compute node
GPU_WRAPPER = ("bash", "-c", 'export CUDA_VISIBLE_DEVICES=$SLURM_LOCALID; exec "$@"', "commstack-gpu")


@dataclass
class Step:
    name: str
    argv: list[str]
    nodes: int = 1
    ntasks: int = 2
    ntasks_per_node: int | None = None
    timeout_s: int = 300
    environment: str | None = None  # Container Engine EDF
    gpus: bool = False  # bind one GPU per local rank, as the system says
    variables: dict[str, str] = field(default_factory=dict)
    probe: bool = False  # the facts probe (our shell): the variables are its arguments, SEARCH_PATH alone its own
    #: the nodes it runs on, by name and in rank order with one rank per node (commstack screen: many steps at
    #: once on disjoint nodes, each `--exact`); empty: the allocation's first `nodes`
    hosts: list[str] = field(default_factory=list)


@dataclass
class StepResult:
    step: Step
    command: list[str]
    returncode: int | None
    stdout: str  # decoded with errors="replace", at most output_limit() bytes; stdout.txt and stderr.txt
    # keep the raw bytes
    stderr: str
    started: float
    elapsed_s: float
    nodelist: list[str]
    outdir: Path
    error: str | None = None  # name of the LaunchError subclass, when the step did not run to the end

    def record(self) -> dict[str, Any]:
        return {"step": asdict(self.step), "command": self.command, "returncode": self.returncode,
                "started": self.started, "elapsed_s": self.elapsed_s, "nodelist": self.nodelist,
                "outdir": str(self.outdir), "error": self.error}


NODE_FAILURE = re.compile(r"node failure|NODE_FAIL|DUE TO NODE FAILURE|Node .* not responding|"
                          r"Communication connection failure", re.I)
SRUN_REFUSED = re.compile(r"srun: error: (Unable to (allocate|create step)|invalid|Invalid|.*not available|"
                          r".*unrecognized option)|srun: unrecognized option|srun: fatal:")
# srun may exit 0 when the step never started on a node
PAIR_FAILED = re.compile(r"^commstack pair: error: .*$", re.M)  # commstack.run.pair: why a pair did not meet
NOT_LAUNCHED = re.compile(r"srun: error: task \d+ launch failed|aborted before step completely launched")
SIGNALLED = re.compile(r"task \d+: (Killed|Segmentation fault|Aborted|Bus error|Terminated)|"
                       r"exited on signal|signal \d+")


class Allocation:
    """One Slurm allocation for the whole session, or the caller's own (SLURM_JOB_ID)."""

    def __init__(self, system: System, slurm_variables: dict[str, str], nodes: int, ntasks: int):
        self.system, self.variables = system, slurm_variables
        self.nodes, self.ntasks = nodes, ntasks
        self.job_id: str | None = None
        self.owned = False

    def __enter__(self) -> "Allocation":
        if existing := self.variables.get("SLURM_JOB_ID"):
            self.job_id = existing
            return self
        if not shutil.which("salloc"):
            raise SlurmUnavailableError("salloc not found: no Slurm client on this machine")
        argv = ["salloc", "--no-shell", f"-N{self.nodes}", f"-n{self.ntasks}", "-t60",
                "--job-name=commstack", *self.system.launcher.salloc_flags]
        if self.variables.get("COMMSTACK_SLURM_LEASE"):  # the local Slurm cancels a lease's jobs when its holder goes
            argv.append(f"--comment={self.variables['COMMSTACK_SLURM_LEASE']}")
        if self.system.partition:
            argv.append(f"--partition={self.system.partition}")
        try:
            proc = subprocess.run(argv, executable=executable("salloc"), env=self.variables, capture_output=True,
                                  text=True, timeout=120)
        except subprocess.TimeoutExpired:
            raise SlurmUnavailableError(f"{' '.join(argv)} got no allocation within 120 s") from None
        m = re.search(r"Granted job allocation (\d+)", proc.stderr + proc.stdout)
        if proc.returncode != 0 or not m:
            raise SlurmUnavailableError(f"{' '.join(argv)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
        self.job_id, self.owned = m.group(1), True
        return self

    @functools.cached_property
    def hosts(self) -> list[str]:
        """The allocation's node names, asked once (a node that fails later stays in the list)."""
        nodes = client(["squeue", "-h", "-j", str(self.job_id), "-o", "%N"], self.variables).stdout.strip()
        if not nodes:
            return []
        return client(["scontrol", "show", "hostnames", nodes], self.variables).stdout.split() or [nodes]

    def state(self, settle_s: float = 10.0) -> str:
        """The job's state as squeue says (RUNNING, CANCELLED, NODE_FAIL, ...), or `unknown` when it does not
        know it. A job still COMPLETING (its nodes ending its tasks) is asked again for up to settle_s, for
        the state it ends in."""
        deadline = time.monotonic() + settle_s
        while True:
            out = client(["squeue", "-h", "-t", "all", "-j", str(self.job_id), "-o", "%T"], self.variables)
            state = out.stdout.strip() or "unknown"
            if state != "COMPLETING" or time.monotonic() > deadline:
                return state
            time.sleep(0.5)

    def __exit__(self, *exc: object) -> None:
        """Cancel the allocation we made. With the controller gone there is nobody to ask: the
        local Slurm's stop() ends what is left."""
        if self.owned and self.job_id:
            self.owned = False
            with contextlib.suppress(ControllerLostError):
                client(["scancel", self.job_id], self.variables)


class Launcher:
    def __init__(self, system: System, kind: str = "srun", slurm_variables: dict[str, str] | None = None,
                 allocation: Allocation | None = None, mpirun: str = "mpirun"):
        self.system, self.kind = system, kind
        self.mpirun = mpirun  # an env's MPI's (commstack run --env), else the one on PATH
        self.variables = dict(slurm_variables or os.environ)
        self.allocation = allocation
        #: once slurmctld or the allocation is gone, no further step is launched
        self.lost: SlurmUnavailableError | None = None
        #: the launched steps still running (steps run from several threads at once: commstack screen)
        self.running: set[subprocess.Popen] = set()
        self._running_lock = threading.Lock()

    def benchmark_variables(self, step: Step) -> dict[str, str]:
        """The system's and the step's variables: the benchmark's ranks alone get them (program())."""
        return {**self.system.variables, **step.variables}

    def program(self, step: Step) -> list[str]:
        """The step's program as launched: the benchmark's variables for it alone, after every program of ours
        (docs/harness.md#what-a-step-may-print-and-leave-behind)."""
        variables = self.benchmark_variables(step)
        if step.probe:
            search = [f"{k}={v}" for k, v in variables.items() if k in SEARCH_PATH]
            argv = [*step.argv, *(f"{k}={v}" for k, v in variables.items() if not LOADER.fullmatch(k))]
            return ["env", *search, *argv] if search else argv
        if not variables:
            return list(step.argv)
        words = [f"{k}={v}" for k, v in variables.items()]
        return pair.with_variables(step.argv, variables) or ["env", *words, *step.argv]

    def reaped(self, step: Step) -> list[str]:
        """The step's program under commstack's reaper (procs.reap), which ends whatever the program leaves; not our
        probe, and not in a container (its own processes, its own runtime's end)."""
        prog = self.program(step)
        return prog if step.probe or step.environment else [*REAPER, *prog]

    def command(self, step: Step) -> list[str]:
        """The exact command line for a step: what the dry run prints and what runs."""
        s = self.system
        if self.kind == "mpirun":
            argv = [self.mpirun, "-np", str(step.ntasks)]
            if step.ntasks_per_node:
                argv += ["--map-by", f"ppr:{step.ntasks_per_node}:node"]
            argv += s.launcher.mpirun_flags
            return argv + self.reaped(step)
        argv = ["srun"]
        if self.allocation and self.allocation.job_id:
            argv.append(f"--jobid={self.allocation.job_id}")
        argv += [f"--mpi={s.launcher.mpi}", f"-N{step.nodes}"]
        if self._hosts_for(step):
            argv.append(f"--nodelist={','.join(self._hosts_for(step))}")
        if step.hosts:  # only the CPUs it asks for: steps beside it on other nodes start at once
            argv.append("--exact")
            if len(step.hosts) > 1 and step.ntasks_per_node == 1:  # rank i on hosts[i]: who sends is who we name
                argv.append("--distribution=arbitrary")
        argv += [f"--ntasks-per-node={step.ntasks_per_node}"] if step.ntasks_per_node else [f"-n{step.ntasks}"]
        # a rank that dies ends the step: its peers would wait for it until the time limit
        argv += [f"-t{max(1, -(-step.timeout_s // 60))}", "--kill-on-bad-exit=1"]
        if step.environment:
            argv.append(f"--environment={step.environment}")
        if step.gpus and s.launcher.gpu_binding == "gpus-per-task":
            argv.append("--gpus-per-task=1")
        argv += s.launcher.srun_flags
        prog = self.reaped(step)
        if step.gpus and s.launcher.gpu_binding == "localid":
            prog = [*GPU_WRAPPER, *prog]
        return argv + ["--"] + prog  # the program and its arguments are never srun's options

    def check_alive(self, step: Step) -> None:
        """Raise, for a step not yet launched, the loss (controller, allocation) an earlier step met."""
        if self.lost:
            raise type(self.lost)(f"{step.name}: not run: {self.lost}")

    def run(self, step: Step, outdir: Path) -> StepResult:
        """Run one step and keep its output in `outdir`; raise the LaunchError that says why it did
        not run to the end. ControllerLostError, AllocationLostError: for this step and, unlaunched,
        every later one."""
        self.check_alive(step)
        try:
            outdir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise FileWriteError.of(outdir, e) from e
        cmd = self.command(step)
        env = dict(self.variables)  # the benchmark's variables are on its command line (program())
        if self.kind == "mpirun" and os.geteuid() == 0:  # Open MPI's mpirun refuses root without these
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        write_atomic(outdir / "command.txt", shlex.join(cmd) + "\n")
        ranks = {**env, **self.benchmark_variables(step)}  # what the benchmark's ranks get
        write_json(outdir / "variables.json", {k: ranks[k] for k in sorted(ranks) if _interesting(k)})
        env[STEP_TOKEN] = token = secrets.token_hex(8)
        prog = step.argv[0]
        if not step.environment and not (Path(prog).is_file() or shutil.which(prog)):
            raise BinaryNotFoundError(f"{step.name}: benchmark binary {prog!r} not found", str(outdir))
        limit = output_limit()
        started = time.time()
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, executable=executable(cmd[0]), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        with self._running_lock:
            self.running.add(proc)
        sinks = {proc.stdout.fileno(): Sink(outdir / "stdout.txt", limit),
                 proc.stderr.fileno(): Sink(outdir / "stderr.txt", limit)}
        marks = {STEP_TOKEN: token}

        def end_orphans() -> None:  # mpirun waits for every holder of its ranks' output: their daemons end with them
            if left := orphans(marks, proc.pid):
                sweep(marks, only=left)
        try:
            ended = pump(proc, sinks, t0 + step.timeout_s, tidy=end_orphans if self.kind == "mpirun" else None)
            if ended != "exited":
                stop(proc)
        except BaseException:  # Ctrl-C: cancel the step, keep what it wrote
            stop(proc)
            raise
        finally:
            try:
                sweep(marks)  # what it left running here: a daemon, a rank of mpirun
                pump(proc, sinks, time.monotonic() + 30, watch=False)  # what it printed while it stopped
                sweep(marks)
            finally:
                with self._running_lock:
                    self.running.discard(proc)
                for sink in sinks.values():
                    sink.close()
                proc.stdout.close()
                proc.stderr.close()
        timed_out, too_large = ended == "timeout", any(sink.over for sink in sinks.values())
        elapsed = time.monotonic() - t0
        out, err = (sink.text() for sink in sinks.values())
        result = StepResult(step, cmd, proc.returncode, out, err, started, elapsed, self.nodelist(step), outdir)
        try:
            if too_large:
                raise output_too_large(step.name, {s.path.name: s.size for s in sinks.values() if s.over}, limit,
                                       outdir)
            self._classify(result, timed_out)
        except LaunchError as e:
            result.error = e.kind
            write_json(outdir / "step.json", result.record())
            raise
        write_json(outdir / "step.json", result.record())
        return result

    def stop_all(self) -> None:
        """Cancel every step still running (srun cancels its step on SIGINT), from another thread than
        theirs: each one's run() then ends as for a timeout, keeping its output, and sweeps what it left."""
        with self._running_lock:
            procs = list(self.running)
        stoppers = [threading.Thread(target=stop, args=(proc,)) for proc in procs]  # each takes ~1 s: at once
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()

    def nodelist(self, step: Step) -> list[str]:
        """The nodes `step` runs on, known before it runs."""
        if self.kind == "mpirun" or not self.allocation or not self.allocation.job_id:
            return [os.uname().nodename]
        return self._hosts_for(step) or self.allocation.hosts

    def _hosts_for(self, step: Step) -> list[str]:
        """A step on fewer nodes than the allocation gets named ones, so its node list is known."""
        if step.hosts:
            return list(step.hosts)
        hosts = self.allocation.hosts if self.allocation and self.allocation.job_id else []
        return hosts[:step.nodes] if 0 < step.nodes < len(hosts) else []

    def _classify(self, r: StepResult, timed_out: bool) -> None:
        try:
            self.classify(r, timed_out)
        except LaunchError as e:
            if self.kind == "srun":
                self.lost = self._slurm_lost(r)
                if self.lost and not isinstance(e, NodeFailureError):  # a node failure keeps its name
                    raise self.lost from e
            raise

    def _slurm_lost(self, r: StepResult) -> SlurmUnavailableError | None:
        """After a step that failed: whether the controller, or else the allocation, is gone."""
        try:
            answers = client(["scontrol", "ping"], self.variables, timeout=10).returncode == 0
        except ControllerLostError:
            answers = False
        if not answers:
            return ControllerLostError(f"the Slurm controller stopped answering during step {r.step.name} "
                                       f"(scontrol ping fails)", str(r.outdir))
        if self.allocation and self.allocation.job_id:
            state = self.allocation.state()
            if state != "RUNNING":
                return AllocationLostError(f"the allocation (job {self.allocation.job_id}) ended during step "
                                           f"{r.step.name} (job state: {state})", str(r.outdir))
        return None

    @staticmethod
    def classify(r: StepResult, timed_out: bool) -> None:
        """The named LaunchError of a step that did not run to its end, or nothing (a batch job's
        saved steps are classified the same way)."""
        name, raw = r.step.name, str(r.outdir)
        if timed_out:
            raise StepTimeoutError(f"{name}: step timed out after {r.step.timeout_s} s", raw)
        if NODE_FAILURE.search(r.stderr):
            raise NodeFailureError(f"{name}: node failure reported by srun: {_first(NODE_FAILURE, r.stderr)}", raw=raw)
        if NOT_LAUNCHED.search(r.stderr):
            raise SrunError(f"{name}: the step did not launch: {_first(NOT_LAUNCHED, r.stderr)}", raw)
        if r.returncode == 0:
            return
        if PAIR_FAILED.search(r.stderr):
            raise PairFailedError(f"{name}: {_first(PAIR_FAILED, r.stderr).removeprefix('commstack pair: error: ')}",
                                  raw)
        if SRUN_REFUSED.search(r.stderr) and not r.stdout.strip():
            raise SrunError(f"{name}: srun refused the step: {_first(SRUN_REFUSED, r.stderr)}", raw)
        if r.returncode < 0 or SIGNALLED.search(r.stderr):
            raise StepCrashedError(f"{name}: killed by a signal (exit {r.returncode}): "
                                   f"{_first(SIGNALLED, r.stderr) or ''}", raw)
        raise StepCrashedError(f"{name}: exit status {r.returncode}; last stderr line: "
                               f"{cut((r.stderr.strip().splitlines() or [''])[-1])!r}", raw)


def _first(pattern: re.Pattern, text: str) -> str:
    return next((cut(line.strip()) for line in text.splitlines() if pattern.search(line)), "")


def _interesting(key: str) -> bool:
    return key.startswith(("SLURM_", "OMPI_", "PMIX_", "UCX_", "FI_", "NCCL_", "CUDA_", "MPICH_", "CXI_")) \
        or key in ("PATH", "HOSTNAME") or bool(LOADER.fullmatch(key))
