"""A run: suite steps on one system, in one Slurm allocation, each step launched, parsed, judged and
recorded. No pytest in here: the pytest plugin drives a Run, one test item per step.

Every step ends with a record, whatever happens: a step the system cannot run, a missing binary or
no Slurm is `not-run` with the reason and the fix; a crash, a timeout or output that does not parse
is `fail` with the named error; Ctrl-C (or SIGTERM, SIGHUP, SIGQUIT: interrupted_by) records the step as
interrupted and re-raises. close()
releases the allocation, stops the Slurm the run started, and records every step it never reached.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

from commstack.config import System
from commstack.errors import (BinaryNotFoundError, CommstackError, LaunchError, ParseError, SlurmUnavailableError,
                              StepCrashedError, ValidationFailedError)
from commstack.files import FileWriteError, UnsafePathError, make_dirs, own_dir
from commstack import benchmarks, exits
from commstack.benchmarks import METRICS
from commstack.results.judge import judge
from commstack.results.references import References, references_of
from commstack.tools.lines import Sweep
from commstack.results.parse import parse_output, validated, validation_failure
from commstack.results.records import Plan, Record
from commstack.run import doubts
from commstack.run.binaries import Binaries
from commstack.run.facts import lower_layer_problem, parse_probe, probe_argv
from commstack.run.pair import repeat_step
from commstack.run.launch import Allocation, Launcher, Step, StepResult
from commstack.run.steps import SuiteStep
from commstack.slurm.cluster import take_slurm
from commstack.spack.trust import UntrustedPathError

#: the phases of a run's timings; build: finding or building the binaries
PHASES = ("slurm start", "allocation", "build", "steps", "report", "release")


class ResultsDirError(CommstackError):
    """A results directory given to a run already holds something: runs are never mixed."""


def new_run_dir(root: Path, latest: bool = True) -> Path:
    """results/<date-time-microseconds>-<random>, created exclusively, 0750 less the umask, in a results/
    that is ours and private (files.own_dir), and (latest=True) results/latest pointing at it."""
    root = own_dir(root, private=True)
    run_id = datetime.now().strftime("%Y%m%d-%H%M%S-%f-") + secrets.token_hex(3)
    path = root / run_id
    try:  # exclusive: of two runs in the same microsecond, the random part tells them apart
        path.mkdir(mode=0o750)
    except OSError as e:
        raise FileWriteError.of(path, e) from e
    if not latest:
        return path
    link = root / f".latest.{run_id}"
    link.symlink_to(run_id)
    os.replace(link, root / "latest")
    return path


def check_results_dir(path: Path) -> None:
    """A --results directory may be new or empty, never one that holds another run's files."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise ResultsDirError(f"--results {path} exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        raise ResultsDirError(f"--results {path} exists and is not empty; give a new or empty directory "
                              "(or none: a new results/<run-id>)")


def given_run_dir(path: Path) -> Path:
    """The --results directory, checked and made."""
    check_results_dir(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FileWriteError.of(path, e) from e
    return path


def substitute(argv: list[str], binaries: dict[str, str]) -> list[str]:
    """`$OSU_MPI/pt2pt/osu_bw` -> the real path; other arguments unchanged."""
    out = []
    for arg in argv:
        head, sep, rest = arg.partition("/")
        out.append(binaries.get(head, head) + sep + rest)
    return out


def new_record(run_id: str, index: int, s: SuiteStep, system: System, reason: str | None = None) -> Record:
    """A step's record before it runs: not-run, with the reason the system cannot run it, if any."""
    return Record(run_id=run_id, index=index, suite=s.tags["suite"], system=system.name, step=s.id,
                  benchmark=s.benchmark, tool=s.tool, tags=s.tags, metric=s.metric, unit=METRICS[s.metric].unit,
                  verdict="not-run", reason=s.not_run or reason or "")


@contextlib.contextmanager
def judged(record: Record):
    """A step's named errors as its verdict: what could not start is not-run, what broke is fail."""
    try:
        yield
    except (BinaryNotFoundError, SlurmUnavailableError, UnsafePathError, UntrustedPathError) as e:
        record.verdict, record.error_kind, record.reason = "not-run", e.kind, str(e)
    except CommstackError as e:  # LaunchError, ParseError, FileWriteError, ...
        record.verdict, record.error_kind, record.reason = "fail", e.kind, str(e)
        if isinstance(e, ValidationFailedError):
            record.validated = "failed"


@contextlib.contextmanager
def validation_first(s: SuiteStep, step: Step, outdir: Path):
    """A step that exits non-zero after its benchmark said its data check failed is validation-failed."""
    try:
        yield
    except StepCrashedError as e:
        failed = validation_failure(s.benchmark, (outdir / "stdout.txt").read_bytes().decode(errors="replace"),
                                    step.argv[1:], step.ntasks)
        if failed:
            raise failed from e
        raise


def launched_step(s: SuiteStep, argv: list[str]) -> Step:
    """The step as launched: real binaries, and the variables its tool needs (nccl-tests: NCCL_DEBUG=INFO,
    so that its output names the net plugin)."""
    tool = benchmarks.get(s.benchmark).tool
    return dataclasses.replace(s.step, argv=argv, variables={**s.step.variables, **dict(tool.variables)})


def probe_step(step: Step, programs: dict[str, str] | None = None) -> Step:
    """The facts probe, placed exactly like `step` (nodes, ranks, GPU binding, container); `programs`: the
    env's fi_info and ucx_info (Binaries.facts_programs)."""
    return dataclasses.replace(step, name=f"{step.name}-probe", argv=probe_argv(step.argv[0], programs),
                               timeout_s=120, probe=True)


def probe(launcher: Launcher, step: Step, outdir: Path, programs: dict[str, str] | None = None) -> dict:
    """Stack facts from the nodes `step` runs on; a probe that fails costs the facts, not the step."""
    try:
        result = launcher.run(probe_step(step, programs), outdir)
        return parse_probe(result.stdout)
    except (LaunchError, ParseError) as e:
        return {"probe_error": f"{type(e).__name__}: {e}"}


def placement(launcher: Launcher, step: Step) -> tuple:
    """What the facts of a step depend on: its probe's command line (nodes, ranks, GPU binding,
    container, binary) and its environment. Steps placed alike share one probe."""
    return tuple(launcher.command(probe_step(step))), tuple(sorted(step.variables.items()))


def raw_dir(run_dir: Path, dirname: str, name: str) -> Path:
    """steps/<dirname>/<name> for a step's raw output, made without following a symlink (files.make_dirs)."""
    try:
        return make_dirs(run_dir, "steps", dirname, name)
    except OSError as e:
        raise FileWriteError.of(run_dir / "steps" / dirname / name, e) from e


def launches(s: SuiteStep, step: Step, launcher: Launcher, run_dir: Path, record: Record,
             keep_failed: bool = True) -> Iterator[StepResult]:
    """The executor of a run and of the screen's pool: each repeat of `step` launched (srun, or mpirun) as the one
    before it was evaluated, its output in steps/<dirname>/repeat-N; `keep_failed`: a repeat that failed or was
    interrupted names the output it kept in the record. A batch job's executor is run.batch's `collected`."""
    for r in range(s.repeats):
        outdir = raw_dir(run_dir, record.dirname, f"repeat-{r}")
        try:
            with validation_first(s, step, outdir):
                result = launcher.run(repeat_step(step, outdir), outdir)
        except BaseException:
            if keep_failed and (outdir / "stdout.txt").exists():
                record.outputs.append(str(outdir.relative_to(run_dir)))
            raise
        yield result


def evaluate(s: SuiteStep, record: Record, results: Iterable[StepResult], stack: dict, system: System,
             references: References | None, run_dir: Path) -> None:
    """A step's repeats, as its executor hands them over (`launches`, or a batch job's files), parsed, and the step
    judged with its nodes' facts and the references, into its record: one path for a run, a batch job and the
    screen."""
    sweeps, out = [], ""
    for result in results:
        sweeps.append(add_repeat(s, record, result, run_dir))
        out = result.stdout + result.stderr
    conclude(s, record, sweeps, out, stack, system, references)


def add_repeat(s: SuiteStep, record: Record, result: StepResult, run_dir: Path) -> Sweep:
    """One repeat's saved output into the record: command, nodes, parsed rows."""
    record.outputs.append(str(result.outdir.relative_to(run_dir)))
    record.commands.append(result.command)
    record.nodelist = result.nodelist
    sweep = parse_output(s.benchmark, result.stdout, result.step.argv[1:], ranks=result.step.ntasks)
    record.repeats.append(sweep.rows)
    record.notes += [f"repeat {len(record.repeats)}, {n}" for n in sweep.notes]
    return sweep


def conclude(s: SuiteStep, record: Record, sweeps: list[Sweep], out: str, stack: dict, system: System,
             references: References | None) -> None:
    """The verdict of a step from its parsed repeats and the facts of its nodes: the same for a step run
    here and one collected from a batch job."""
    verdict = judge(sweeps, s.tags, references, s.metric, system.nic_line_rate_MBps, system.name)
    record.title, record.version = sweeps[0].title, sweeps[0].version
    record.verdict, record.reason, record.detail = verdict.verdict, verdict.reason, verdict.summary()
    # the worst of the repeats: one that checked no data leaves the step unvalidated
    record.validated = max((validated(sw) for sw in sweeps), key=("yes", "no", "failed").index)
    if s.require_validation and record.validated == "no" and record.verdict != "fail":
        record.verdict = "fail"
        record.reason = (f"not validated: {s.benchmark} checked no data (OSU without -c, nccl-tests -c 0), and the "
                         "suite or system requires validation (require_validation: true)")
        record.detail += f"\n  validation: {record.reason}"
    record.stack = {**stack, "gpu_binding": system.launcher.gpu_binding}
    tool = benchmarks.get(s.benchmark).tool
    facts, problem = tool.stack(out, system, s.tags) if tool.stack else ({}, None)
    record.stack.update(facts)
    # the provider and transports the system expects, on the nodes of a step of their layer
    fabric = system.fabric
    problem = problem or (fabric and lower_layer_problem(tool.layer, fabric.provider, fabric.ucx_transports,
                                                         stack.get("nodes", {})))
    if problem:
        record.verdict, record.reason = "fail", problem
        record.detail += f"\n  stack: {problem}"


class Run:
    """One run of suite steps on a system: its results directory, Slurm, allocation and records."""

    def __init__(self, system: System, results: Path, binaries: Binaries, launcher: str = "srun",
                 slurm: str = "auto"):
        self.system, self.dir, self.binaries = system, results, binaries
        self.id = results.name
        self.launcher_kind, self.slurm_mode = launcher, slurm
        self.references: References | None = references_of(system)
        self.planned: list[SuiteStep] = []
        self.records: dict[tuple[str, str], Record] = {}
        self._cleanup = contextlib.ExitStack()
        self._launcher: Launcher | None = None
        self._variables: dict[str, str] | None = None
        self._slurm_error: CommstackError | None = None  # a Slurm that failed to start is not tried again
        #: the first write to the results directory that failed, and the records that could not be written
        self.unsaved: FileWriteError | None = None
        self.unsaved_records: set[tuple[str, str]] = set()
        self._facts: dict[tuple, dict] = {}  # placement -> stack facts, probed once per run
        #: where the run's time went (seconds), each phase of PHASES without the phases inside it
        self.timings: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._inner = 0.0
        self.interrupted_by = "Ctrl-C"  # or the signal that ended the run instead (exits.CtrlC sets it)
        binaries.build_dir = binaries.build_dir or results / "build"

    @contextlib.contextmanager
    def phase(self, name: str):
        """Adds the time spent inside to timings[name], less the time of the phases nested in it."""
        t0, outer, self._inner = time.monotonic(), self._inner, 0.0
        try:
            yield
        finally:
            spent = time.monotonic() - t0
            self.timings[name] += spent - self._inner
            self._inner = outer + spent

    # ---- resources, made when the first step needs them and released by close()

    def slurm_variables(self) -> dict[str, str]:
        """The site's Slurm, or the embedded one under this run's lease (never a production queue by
        accident: the local systems get the embedded Slurm under --slurm auto)."""
        if self._slurm_error:
            raise self._slurm_error
        if self._variables is None:
            try:
                self._variables = self._start_slurm()
            except CommstackError as e:
                self._slurm_error = e
                raise
        return self._variables

    def _start_slurm(self) -> dict[str, str]:
        return take_slurm(self.system.name, self.slurm_mode, self._cleanup, self.system.nodes,
                          "use --launcher mpirun to run without it", lambda: self.phase("slurm start"))

    def launcher(self) -> Launcher:
        if self._launcher is None:
            if self.launcher_kind == "mpirun":
                self._launcher = Launcher(self.system, "mpirun", mpirun=self.binaries.mpirun())
            else:
                variables = self.slurm_variables()
                runnable = [s.step for s in self.planned if not s.not_run]
                nodes = max([min(self.system.nodes, 2)] + [st.nodes for st in runnable])  # the largest step
                ntasks = max([2 * nodes] + [st.ntasks for st in runnable])
                with self.phase("allocation"):
                    alloc = self._cleanup.enter_context(Allocation(self.system, variables, nodes=nodes, ntasks=ntasks))
                self._launcher = Launcher(self.system, "srun", slurm_variables=variables, allocation=alloc)
        return self._launcher

    # ---- steps

    def execute(self, s: SuiteStep) -> Record:
        if not self.records:  # before the first step: what the run set out to do
            Plan(system=str(self.system.path), steps=[new_record(self.id, i, p, self.system)
                                                      for i, p in enumerate(self.planned)]).write(self.dir)
        record = new_record(self.id, self._index(s), s, self.system)
        self.records[record.key] = record
        if self.unsaved and not s.not_run:
            record.error_kind = self.unsaved.kind
            record.reason = f"the results directory cannot be written ({self.unsaved})"
        if self.unsaved or s.not_run:
            self._keep(record)
            return record
        record.started = time.time()
        t0 = time.monotonic()
        try:
            with self.phase("steps"), doubts.checked(record, self.dir), judged(record):
                try:
                    self._execute(s, record)
                except FileWriteError as e:
                    self.unsaved = self.unsaved or e
                    raise
        except KeyboardInterrupt:
            record.verdict, record.reason = "not-run", f"interrupted ({self.interrupted_by}); its output so far is kept"
            raise
        finally:
            record.elapsed_s = time.monotonic() - t0
            self._keep(record)
        return record

    def _keep(self, record: Record) -> None:
        """record.json, or the record noted as not saved (a full results file system): the run goes on
        to release what it holds and print the verdicts."""
        try:
            record.write(self.dir)
        except FileWriteError as e:
            self.unsaved = self.unsaved or e
            self.unsaved_records.add(record.key)

    def _execute(self, s: SuiteStep, record: Record) -> None:
        with self.phase("build"):
            binaries = self.binaries.resolve(s)
            argv = substitute(s.step.argv, binaries)
        tool = benchmarks.get(s.benchmark).tool
        if binaries:
            record.binary = self.binaries.record(tool, binaries[tool.placeholder], argv)
        step = launched_step(s, argv)
        if binaries and self.system.gpus_per_node == 0 and (extra := self.binaries.without_driver()):
            given = {**self.system.variables, **step.variables}
            extra["LD_LIBRARY_PATH"] = ":".join(p for p in (given.get("LD_LIBRARY_PATH"), extra["LD_LIBRARY_PATH"])
                                                if p)  # the stubs last: whatever the system puts first wins
            step = dataclasses.replace(step, variables={**step.variables, **extra})
            record.binary["cuda_driver"] = ("no GPU on these nodes: the env's CUDA driver stubs, host memory ("
                                            + ", ".join(f"{k}={v}" for k, v in extra.items()) + ")")
        launcher = self.launcher()
        launcher.check_alive(step)  # a step after a lost allocation leaves no directory behind
        stack, record.nodelist = self.facts(launcher, step, record.dirname), launcher.nodelist(step)  # kept on failure
        evaluate(s, record, launches(s, step, launcher, self.dir, record), stack, self.system, self.references,
                 self.dir)

    def facts(self, launcher: Launcher, step: Step, dirname: str) -> dict:
        """The stack facts of the step's placement: probed (output in steps/<dirname>/probe) by the first step
        placed so; later ones name that probe's directory."""
        key = placement(launcher, step)
        if key not in self._facts:
            outdir = raw_dir(self.dir, dirname, "probe")
            self._facts[key] = {**probe(launcher, step, outdir, self.binaries.facts_programs()),
                                "probe": str(outdir.relative_to(self.dir))}
        return self._facts[key]

    def _index(self, s: SuiteStep) -> int:
        return next((i for i, p in enumerate(self.planned) if p is s), len(self.planned))

    def close(self, interrupted: bool = False) -> list[Record]:
        """Release what the run holds and record every planned step it never reached."""
        try:
            with self.phase("release"):
                self._cleanup.close()
        finally:
            why = f"interrupted ({self.interrupted_by}) before this step" if interrupted else \
                "the run ended before this step"
            for s in self.planned:
                key = (s.tags["suite"], s.id)
                if key not in self.records:
                    self.records[key] = new_record(self.id, self._index(s), s, self.system, why)
                    self._keep(self.records[key])
        return list(self.records.values())


def exit_status(records: list[Record], allow_not_run: bool = False) -> int:
    """0: every step ran and passed; 1: some step did not pass; 3: the rest passed but some did not run."""
    if any(r.verdict not in ("pass", "not-run") for r in records):
        return exits.FAILED
    if any(r.verdict == "not-run" for r in records) and not allow_not_run:
        return exits.NOT_RUN
    return exits.PASS
