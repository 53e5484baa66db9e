"""Batch submission: a whole suite as one Slurm job script, submitted with sbatch, judged later
(docs/harness.md#batch-jobs-history-and-exports; what the script may hold: #untrusted-input). Each repeat's
exit status is written last (a repeat without one never finished); `commstack status RUN` polls the job and,
once it ended, expands the same steps from the plan and judges their saved output through run.lifecycle.
"""

from __future__ import annotations

import dataclasses
import math
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from commstack.config import Suite, System, load_suite, load_system
from commstack.errors import (CommstackError, InputFileError, LaunchError, ParseError, SlurmUnavailableError,
                              has_control, printable)
from commstack.files import read_bounded, write_atomic
from commstack.results.records import PLAN, Plan, Record, read_run
from commstack.results.records import read_plan as read_run_plan
from commstack.run.capture import output_limit, output_too_large
from commstack.run.facts import PROBE, parse_probe
from commstack.run.launch import GPU_WRAPPER, Launcher, Step, StepResult
from commstack.run.pair import placed
from commstack.run.binaries import Binaries
from commstack.run.lifecycle import Executor, Lifecycle, launched_step, validation_first
from commstack.run.runner import probe_step, substitute
from commstack.run.steps import SuiteStep, expand
from commstack.slurm.clients import executable
from commstack.slurm.procs import REAPER
from commstack.results import history
from commstack.results.references import references_of

EXIT = "exit"          # "<status> <started> <ended>", written by the job after the command returns
#: squeue states of a job that has not ended yet
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING",
          "STAGE_OUT", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "STOPPED"}
#: the job's own shell function: one command, its output (each stream cut one byte past the limit, so that a
#: larger one is known) and exit status into a directory
RUN_STEP = """run_step() {  # DIR TIMEOUT_S COMMAND...: stdout, stderr, then "status started ended" last
  local d=$1 t=$2 s; shift 2
  mkdir -p "$d"; s=$(date +%s.%N)
  { timeout -s TERM -k 20 "$t" "$@" 2>&1 >&3 3>&- | head -c "$COMMSTACK_OUTPUT_CUT" > "$d/stderr.txt" 3>&-
    exit "${PIPESTATUS[0]}"; } 3>&1 | head -c "$COMMSTACK_OUTPUT_CUT" > "$d/stdout.txt"
  echo "${PIPESTATUS[0]} $s $(date +%s.%N)" > "$d/exit.tmp" && mv "$d/exit.tmp" "$d/exit"
}"""


class BatchError(CommstackError):
    """A run that is not a batch run, or a job Slurm cannot tell about."""


def steps(plan: Plan, system: System) -> list[SuiteStep]:
    return expand(load_suite(plan.suite), system, memory_only=plan.memory, native_only=plan.native_only)


def job_script(run_dir: Path, system: System, suite: Suite, planned: list[SuiteStep], binaries: Binaries,
               plan: Plan) -> str:
    """The job script; fills plan.commands. A step whose binary is missing here stays out of it (the
    run records it not-run with the reason when it is collected)."""
    if has_control(str(run_dir)):
        raise BatchError(f"results directory {printable(str(run_dir))!r}: a control character in a path the job "
                         "script names; choose another directory")
    runnable = [s for s in planned if not s.not_run]
    nodes = max([s.step.nodes for s in runnable] or [1])
    ntasks = max([s.step.ntasks for s in runnable] or [1])
    b = system.batch
    sbatch = [f"--job-name=commstack-{suite.name}", f"--nodes={nodes}", f"--ntasks={ntasks}", f"--time={b.time}",
              f"--output={run_dir.resolve() / 'batch' / 'job-%j.out'}"]
    sbatch += [f"--{flag}={value}" for flag, value in (("partition", system.partition), ("account", b.account),
                                                       ("reservation", b.reservation), ("qos", b.qos)) if value]
    if any(s.step.gpus for s in runnable) and system.node.gpus:
        sbatch.append(f"--gpus-per-node={system.node.gpus}")
    sbatch += system.launcher.salloc_flags + b.sbatch_flags
    lines = ["#!/bin/bash", *(f"#SBATCH {printable(f)}" for f in sbatch)]
    lines += [printable(f"# suite {suite.name} on {system.name}: {len(planned)} steps, {len(runnable)} in this job"),
              f"COMMSTACK_OUTPUT_CUT={output_limit() + 1}  # COMMSTACK_OUTPUT_LIMIT_MIB, and a byte to tell more",
              RUN_STEP, "unset SLURM_NTASKS SLURM_NPROCS  # each srun line gives its own task count"]
    lines.append(f"COMMSTACK_PROBE={shlex.quote(PROBE)}")
    launcher = Launcher(system, "srun", slurm_variables={})
    for s in runnable:
        dirname = s.dirname
        try:
            step = launched_step(s, substitute(s.step.argv, binaries.resolve(s)))
        except LaunchError as e:
            lines.append(printable(f"# not in this job: {dirname}: {e}"))
            continue
        probe = launcher.command(probe_step(step))
        command = launcher.command(step)
        plan.commands[dirname] = [probe, command]
        where = run_dir.resolve() / "steps" / dirname
        lines.append(printable(f"# {dirname}"))
        at = probe.index(PROBE)  # the probe script once, at the top, not in every step
        lines.append(shlex.join(["run_step", str(where / "probe"), "120", *probe[:at]]) + ' "$COMMSTACK_PROBE" '
                     + shlex.join(probe[at + 1:]))
        for r in range(s.repeats):  # a pair tool's launcher: the repeat's rendezvous directory
            lines.append(shlex.join(["run_step", str(where / f"repeat-{r}"), str(step.timeout_s),
                                     *placed(command, where / f"repeat-{r}" / "pair", step.timeout_s)]))
    return "\n".join(lines) + "\n"


def submit(run_dir: Path, system: System, suite: Suite, binaries: Binaries, plan: Plan, slurm_variables: dict[str, str],
           dry_run: bool = False) -> str:
    """Write the job script and plan, submit with sbatch; the job id (or the script, for a dry run)."""
    planned = steps(plan, system)
    plan.steps = Lifecycle(run_dir, system, None).plan(planned)
    script = job_script(run_dir, system, suite, planned, binaries, plan)
    if dry_run:
        return script
    (run_dir / "batch").mkdir(parents=True, exist_ok=True)
    path = run_dir / "batch" / "job.sh"
    write_atomic(path, script, mode=0o755)
    proc = _slurm(["sbatch", "--parsable", str(path)], slurm_variables)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise SlurmUnavailableError(f"sbatch {path} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    plan.job_id = proc.stdout.strip().split(";")[0]
    plan.write(run_dir)
    return plan.job_id


def benchmark_argv(command: list[str]) -> list[str]:
    """The benchmark's own argv in an srun line of Launcher.command (a batch job's, read back from its plan):
    after srun's `--`, our wrappers (GPU binding, reaper) and the variables' `env NAME=VALUE` words."""
    rest = command[command.index("--") + 1:] if "--" in command else command
    for wrapper in (list(GPU_WRAPPER), REAPER):
        if rest[:len(wrapper)] == wrapper:
            rest = rest[len(wrapper):]
    if rest[:1] == ["env"]:
        rest = rest[1:]
        while rest and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", rest[0]):
            rest = rest[1:]
    return rest


def _slurm(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, executable=executable(argv[0]), env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise SlurmUnavailableError(f"{argv[0]} did not answer in 60 s (slurmctld down or overloaded?)") from None
    except OSError as e:
        raise SlurmUnavailableError(f"{argv[0]}: {e.strerror}: no Slurm client here") from None


def job_state(job_id: str, env: dict[str, str]) -> str:
    """The job's state: squeue while Slurm still lists it, else sacct, else UNKNOWN (ended, no accounting)."""
    q = _slurm(["squeue", "-h", "-j", job_id, "-t", "all", "-o", "%T"], env)
    if q.returncode == 0 and q.stdout.strip():
        return q.stdout.split()[0]
    if q.returncode != 0 and "Invalid job id" not in q.stderr:
        raise SlurmUnavailableError(f"squeue -j {job_id} failed: {q.stderr.strip()}")
    a = _slurm(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"], env)
    return a.stdout.split()[0] if a.returncode == 0 and a.stdout.strip() else "UNKNOWN"  # "CANCELLED by 0": CANCELLED


def read_plan(run_dir: Path) -> Plan:
    plan = read_run_plan(run_dir)
    if plan is None or plan.job_id is None:
        raise BatchError(f"{run_dir} is not a batch run (no job in {PLAN}); `commstack suite NAME --submit` makes one")
    return plan


def collect(run_dir: Path, state: str) -> list[Record]:
    """Judge what the ended job left, step by step, exactly as an interactive run judges it."""
    plan = read_plan(run_dir)
    system = load_system(plan.system)
    lifecycle = Lifecycle(run_dir, system, references_of(system))
    records = []
    for index, s in enumerate(steps(plan, system)):
        job = Collected(run_dir, state, plan.commands.get(s.dirname))
        records.append(lifecycle.perform(index, s, job, None if s.not_run else job.missing(s)))
    plan.collected = state
    plan.write(run_dir)
    history.add_run(run_dir)
    return records


@dataclasses.dataclass
class Collected(Executor):
    """The executor of a batch job, after it ended (lifecycle.Executor): each repeat's saved output and exit status,
    classified as a launch here is, with the times the job wrote."""

    run_dir: Path
    state: str                             # the job's final state
    commands: list[list[str]] | None       # [probe command, repeat command], None: not in the job
    hosts: list[str] = dataclasses.field(default_factory=list)  # the nodes its probe answered from
    clocked = False

    def missing(self, s: SuiteStep) -> str | None:
        """Why the step left nothing to judge: not in the job, or the job ended before all its repeats."""
        if self.commands is None:
            return "not in the job: its binary was not found when it was submitted"
        where = self.run_dir / "steps" / s.dirname
        if all((where / f"repeat-{r}" / EXIT).is_file() for r in range(s.repeats)):
            return None
        if (where / "probe").is_dir():
            return f"the job ended ({self.state}) while this step ran; its output so far is kept in {where}"
        return f"the job ended ({self.state}) before this step"

    def prepare(self, s: SuiteStep, record: Record) -> tuple[Step, dict]:
        stack = _probe_facts(self.run_dir / "steps" / record.dirname / "probe")
        self.hosts = sorted(stack.get("nodes", {}))
        return launched_step(s, benchmark_argv(self.commands[1])), stack

    def repeats(self, s: SuiteStep, step: Step, record: Record) -> Iterator[StepResult]:
        limit = output_limit()
        for r in range(s.repeats):
            outdir = self.run_dir / "steps" / record.dirname / f"repeat-{r}"
            rc, started, ended = exit_of(outdir)
            streams = {name: _head(outdir / name, limit) for name in ("stdout.txt", "stderr.txt")}
            over = {name: len(data) for name, data in streams.items() if len(data) > limit}
            if over:
                record.outputs.append(str(outdir.relative_to(self.run_dir)))
                raise output_too_large(s.step.name, over, limit, outdir)
            out, err = (data.decode(errors="replace") for data in streams.values())
            result = StepResult(step, self.commands[1], rc, out, err, started, ended - started, self.hosts, outdir)
            record.started = record.started or started
            record.elapsed_s += result.elapsed_s
            with validation_first(s, step, outdir):
                Launcher.classify(result, timed_out=result.returncode == 124)  # coreutils timeout: 124
            yield result


def _head(path: Path, limit: int) -> bytes:
    """At most limit + 1 bytes of a saved stream: enough to tell that it is past the limit."""
    with open(path, "rb") as f:
        return f.read(limit + 1)


def exit_of(outdir: Path) -> tuple[int, float, float]:
    """A command's exit file as the job wrote it: status, started, ended; BatchError naming it when damaged."""
    path = outdir / EXIT
    text = read_bounded(path, 200, follow_symlinks=False).decode(errors="replace")
    try:
        rc, started, ended = text.split()
        out = int(rc), float(started), float(ended)
    except ValueError:
        out = None
    if out is None or not all(map(math.isfinite, out[1:])):
        raise BatchError(f"{path}: {printable(text.strip())!r} is not the job's '<status> <started> <ended>': damaged")
    return out


def _probe_facts(outdir: Path) -> dict:
    if not (outdir / EXIT).exists():
        return {"probe_error": "the probe did not finish"}
    try:
        rc = exit_of(outdir)[0]
        if rc != 0:
            return {"probe_error": f"exit {rc}: {(outdir / 'stderr.txt').read_text(errors='replace').strip()[-300:]}"}
        return parse_probe((outdir / "stdout.txt").read_text(errors="replace"))
    except OSError:
        return {"probe_error": "the probe did not finish"}
    except (ParseError, BatchError, InputFileError) as e:
        return {"probe_error": f"{type(e).__name__}: {e}"}


def status(run_dir: Path, slurm_variables: dict[str, str], wait: bool = False, poll_s: float = 5.0,
           say=print) -> list[Record] | None:
    """The job's state; once it ended, its results judged and recorded (only once). None: still going."""
    plan = read_plan(run_dir)
    if plan.collected:
        say(f"job {plan.job_id}: {plan.collected}, results collected")
        return read_run(run_dir)
    last = None
    while True:
        state = job_state(plan.job_id, slurm_variables)
        if state != last:
            say(f"job {plan.job_id}: {state}")
            last = state
        if state not in ACTIVE:
            return collect(run_dir, state)
        if not wait:
            return None
        time.sleep(poll_s)
