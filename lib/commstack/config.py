"""The input files and their schemas: systems/<name>.yaml, suites/<name>.yaml and containers/images.yaml (a
system's references: commstack.results.references, on the types here), read through commstack.yamlfile and checked
by pydantic models that forbid unknown keys: a bad file is one ConfigError naming the file, the key path and what
was expected. What could become code or markup in a job script, a command line, a file name or a terminal is
refused here (docs/harness.md#untrusted-input).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PositiveInt, ValidationError,
                      ValidationInfo, field_validator, model_validator)

from commstack import limits, sbatch
from commstack.benchmarks import BENCHMARKS, METRICS
from commstack.errors import ConfigError, has_control
from commstack.paths import IMAGES, SUITES, SYSTEMS
from commstack.yamlfile import read_yaml
from commstack.tools import TOOLS
from commstack.tools.base import byte_count

Model = TypeVar("Model", bound=BaseModel)


def load(model: type[Model], path: Path) -> Model:
    """`path` read as YAML and validated by `model`; every problem in one ConfigError. Read once
    per process while the file stays as it is (cli, the pytest plugin and the runner all ask)."""
    try:
        stat = Path(path).stat()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    return _load(model, Path(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _load(model: type[Model], path: Path, _mtime: int, _size: int) -> Model:
    data = read_yaml(path)
    try:
        return model.model_validate(data, context={"path": path})
    except ValidationError as e:
        problems: dict[str, list[dict]] = {}
        for err in e.errors():  # a union's members fail one by one: one problem per key path
            where = ".".join(str(p) for p in err["loc"] if not (isinstance(p, str) and _MEMBER.fullmatch(p)))
            problems.setdefault(where or "(top level)", []).append(err)
        raise ConfigError(f"{path}: {len(problems)} problem{'s' if len(problems) > 1 else ''}:\n"
                          + "\n".join(_problem(where, errs) for where, errs in problems.items())) from None


#: the names pydantic gives a union's members in an error's location; not keys of the file
_MEMBER = re.compile(r"(int|str|float|bool|none|constrained-\w+|(literal|list|dict|tuple|function-\w+)\[.*\])")


def _problem(where: str, errs: list[dict]) -> str:
    err = errs[0]
    got = "" if err["type"] in ("missing", "extra_forbidden") else f" (got {err['input']!r:.60})"
    said = {"missing": "required key is missing", "extra_forbidden": "unknown key"}
    what = "; or ".join(dict.fromkeys(said.get(e["type"], e["msg"]) for e in errs))
    return f"  {where}: {what}{got}"


def _known(known: dict, what: str) -> AfterValidator:
    def check(v: str) -> str:
        if v not in known:
            raise ValueError(f"unknown {what} {v!r}; known: {', '.join(sorted(known))}")
        return v
    return AfterValidator(check)


BenchmarkName = Annotated[str, _known(BENCHMARKS, "benchmark")]
MetricName = Annotated[str, _known(METRICS, "metric")]

#: the largest message size a suite or a reference may name: 1 TiB, far above any benchmark's sweep
MAX_MESSAGE = 2 ** 40
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_name(v: str, longest: int = 64) -> str:
    """`v` when it is a safe name (SafeName) of at most `longest` characters; ValueError with the rule."""
    if not _SAFE_NAME.fullmatch(v) or ".." in v or len(v) > longest:
        raise ValueError(f"a name is 1 to {longest} letters, digits, '.', '_' or '-', starting with a letter or "
                         "digit, without '..' (it names files and directories)")
    return v


def _line(allow: str = "") -> AfterValidator:
    def check(v: str) -> str:
        c = has_control(v, allow)
        if c is not None:
            raise ValueError(f"control or format character {c!r} (U+{ord(c):04X}) not allowed: it could become a "
                             "command in a job script or an escape sequence on a terminal")
        return v
    return AfterValidator(check)


def _shell_name(v: str) -> str:
    if not _SHELL_NAME.fullmatch(v):
        raise ValueError(f"variable name {v!r} is not a shell name ([A-Za-z_][A-Za-z0-9_]*)")
    return v


def _message_size(v: int | str) -> int | str:
    if byte_count(str(v)) > MAX_MESSAGE:
        raise ValueError(f"size {v} is larger than {MAX_MESSAGE} bytes (1 TiB), the largest message a step may name")
    return v


def _beside_file(v: Path, info: ValidationInfo) -> Path:
    base = (info.context or {}).get("path")
    return (base.parent / v).resolve() if base else v


#: a suite's, step's or system's name: part of file names (steps/<suite>--<step>/) and of job scripts
SafeName = Annotated[str, AfterValidator(check_name)]
#: any other string from an input file: one line, no control or format characters
Line = Annotated[str, _line()]
#: free text (descriptions): lines and tabs allowed, no other control or format characters
Text = Annotated[str, _line("\n\t")]
VariableName = Annotated[str, AfterValidator(_shell_name)]
MessageSize = Annotated[int, Field(ge=0, le=MAX_MESSAGE)]
#: a path a system file gives, resolved against the file's directory
Beside = Annotated[Path, AfterValidator(_beside_file)]
#: a value of an #SBATCH line, one option of a list of them, and one of salloc's (commstack.sbatch)
SbatchValue, SbatchOption, SallocOption = (Annotated[str, _line(), AfterValidator(check)]
                                           for check in (sbatch.value, sbatch.option, sbatch.salloc_option))


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _one_or_list(v: Any) -> Any:
    return [v] if isinstance(v, (str, int)) else v


# ---------------------------------------------------------------------------------------- systems

PerNode = Annotated[int, Field(ge=0, le=limits.RANKS_PER_NODE)]


class Node(Strict):
    cores: Annotated[PositiveInt, Field(le=limits.RANKS_PER_NODE)] | Literal["auto"] = "auto"  # auto: os.cpu_count()
    gpus: PerNode
    nics: PerNode
    nic_line_rate_MBps: Annotated[float, Field(gt=0)] | None = None


class LauncherConfig(Strict):
    mpi: Literal["pmix", "pmi2", "cray_shasta", "none"] = "pmix"
    gpu_binding: Literal["none", "localid", "gpus-per-task"] = "none"
    srun_flags: list[Line] = []
    salloc_flags: list[SallocOption] = []   # #SBATCH lines too, in a batch job
    mpirun_flags: list[Line] = []


class BatchConfig(Strict):
    """What `commstack suite --submit` puts in the job script's #SBATCH lines (with the system's partition)."""

    account: SbatchValue | None = None
    reservation: SbatchValue | None = None
    qos: SbatchValue | None = None
    time: Annotated[str, Field(pattern=r"^(\d+-)?\d+(:\d{2}){0,2}$")] = "01:00:00"   # sbatch --time
    sbatch_flags: list[SbatchOption] = []


class Fabric(Strict):
    """What the lower layers' steps run over, and what every node must have (commstack.run.facts)."""

    provider: Annotated[str, Field(pattern=r"^[a-z0-9_]+$")]   # libfabric's: fi_pingpong -p, and in fi_info -l
    ucx_transports: list[Annotated[str, Field(pattern=r"^[a-z0-9_]+$")]] = []  # each in ucx_info -d


class Install(Strict):
    """Where a system's native binaries come from: an installed Spack env's view (commstack.spack.view)."""

    env: Beside   # the env's directory


class System(Strict):
    """A system file: the machine a suite runs on, and how steps are launched there."""

    name: SafeName
    description: Text = ""
    partition: SbatchValue | None = None
    nodes: PositiveInt
    node: Node
    launcher: LauncherConfig
    variables: dict[VariableName, Line] = {}   # environment variables set for every step
    batch: BatchConfig = BatchConfig()
    nccl_net_plugin: Literal["ofi"] | None = None   # NCCL must select it; an NCCL step that did not fails
    require_validation: bool = False   # a step whose benchmark checked no data (OSU without -c) fails
    fabric: Fabric | None = None       # the libfabric provider and UCX transports the lower layers use
    references: Beside | None = None
    install: Install | None = None     # the env whose view holds the benchmarks (commstack run --env overrides it)
    path: Path | None = None           # set by load_named, not written in the file

    @field_validator("variables", mode="before")
    @classmethod
    def _strings(cls, v: Any) -> Any:
        return {str(k): str(x) for k, x in v.items()} if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _batch_options_once(self) -> "System":
        for flag in self.launcher.salloc_flags:   # a batch job's #SBATCH lines hold both
            name = sbatch.resolve(flag, sbatch.SBATCH)[0].name
            if name in sbatch.BATCH_OPTIONS and getattr(self.batch, name) is not None:
                raise ValueError(f"launcher.salloc_flags {flag!r} and batch.{name} both give a batch job's "
                                 f"--{name}: give it once (salloc_flags' is the batch job's too)")
        return self

    @property
    def cores_per_node(self) -> int:
        return (os.cpu_count() or 1) if self.node.cores == "auto" else self.node.cores


def edf_names() -> list[str]:
    """What a suite step's `environments:` may name besides native: the EDFs of containers/images.yaml."""
    return [e for spec in load(ImagesFile, IMAGES).images.values() for e in spec.edfs]


def load_system(name_or_path: str) -> System:
    return load_named(System, SYSTEMS, name_or_path, "system")


# ----------------------------------------------------------------------------------------- suites

Size = MessageSize | Annotated[str, Field(pattern=r"^\d+[KMG]$"), AfterValidator(_message_size)]


#: the `mode:` values of every tool that has them (mpi-pingpong: cpu, staged, cuda-aware)
MODES = tuple(dict.fromkeys(m for t in TOOLS.values() for m in t.modes))


class StepSpec(Strict):
    """One entry of a suite's `steps:`; expanded per system into concrete steps (run.steps)."""

    benchmark: BenchmarkName
    id: SafeName | None = None
    sizes: tuple[Size, Size] | None = None
    nodes: PositiveInt | Literal["all"] = 1
    node_counts: list[PositiveInt] | dict[Literal["max"], PositiveInt] | None = None
    ranks_per_node: Annotated[PositiveInt, Field(le=limits.RANKS_PER_NODE)] | Literal["nic", "core", "gpu"] = 1
    odd: bool = False
    memory: Annotated[list[Literal["host", "device"]], BeforeValidator(_one_or_list)] = ["host"]
    environments: Annotated[list[Line], BeforeValidator(_one_or_list)] = ["native"]
    mode: Annotated[list[Literal[MODES]], BeforeValidator(_one_or_list)] | None = None
    args: list[Line | int | float] = []
    repeats: Annotated[PositiveInt, Field(le=limits.REPEATS)] = 1
    timeout_s: Annotated[PositiveInt, Field(le=limits.TIMEOUT_S)] = 600

    @field_validator("args", mode="before")
    @classmethod
    def _args_is_a_list(cls, v: Any) -> Any:
        if isinstance(v, str):
            raise ValueError(f"args is a list of arguments, e.g. {v.split()!r}, not one string")
        return v

    @field_validator("sizes", mode="before")
    @classmethod
    def _sizes_pair(cls, v: Any) -> Any:
        if isinstance(v, list) and len(v) != 2:
            raise ValueError("sizes is [smallest, largest]")
        return v

    @field_validator("environments")
    @classmethod
    def _environments(cls, v: list[str]) -> list[str]:
        unknown = [e for e in v if e != "native" and e not in edf_names()]
        if unknown:
            raise ValueError(f"unknown environment {unknown[0]!r}: native, or an EDF of containers/images.yaml "
                             f"({', '.join(edf_names())})")
        return v

    @model_validator(mode="after")
    def _fits_the_benchmark(self) -> "StepSpec":
        bench = BENCHMARKS[self.benchmark]
        if self.mode is not None and not bench.tool.modes:
            owners = "; ".join(f"{t.name}'s ({', '.join(t.modes)})" for t in TOOLS.values() if t.modes)
            raise ValueError(f"mode is {owners}; {self.benchmark} has none")
        if not set(self.mode or ()) <= set(bench.tool.modes):
            raise ValueError(f"mode {self.mode}: {bench.tool.name} has the modes {', '.join(bench.tool.modes)}")
        if self.sizes:
            if bench.sizes.plain and any(isinstance(s, str) for s in self.sizes):
                raise ValueError(f"sizes {list(self.sizes)}: {bench.sizes.plain}; give bytes")
            lo, hi = (byte_count(str(s)) for s in self.sizes)
            if lo > hi:
                raise ValueError(f"sizes {list(self.sizes)}: the smallest comes first")
        return self

    @property
    def argv(self) -> list[str]:
        return [str(a) for a in self.args]

    @property
    def name(self) -> str:
        """What names the step's records (steps/<suite>--<name>...): its id, else its benchmark."""
        return self.id or self.benchmark


class Suite(Strict):
    name: SafeName
    description: Text = ""
    device_args: dict[Literal["pt2pt", "one-sided", "collective"], list[Line]] = {}
    steps: Annotated[list[StepSpec], Field(min_length=1)]
    require_validation: bool = False   # a step whose benchmark checked no data (OSU without -c) fails
    path: Path | None = None

    @model_validator(mode="after")
    def _steps_apart(self) -> "Suite":
        """Each step has a name of its own, and they expand (as run.steps.expand does, on any system) to at most
        limits.STEPS."""
        first: dict[str, int] = {}
        for i, spec in enumerate(self.steps):
            if first.setdefault(spec.name, i) != i:
                raise ValueError(f"steps {first[spec.name]} and {i} are both named {spec.name!r} (their id, else "
                                 "their benchmark): each step's records need a name of their own; give it an `id`")
        most = sum(len(s.memory) * len(s.environments) * len(s.mode or "-") * (s.node_counts["max"].bit_length()
                   if isinstance(s.node_counts, dict) else len(s.node_counts or "-")) for s in self.steps)
        if most > limits.STEPS:
            raise ValueError(f"the steps expand to up to {most} steps; a suite may have at most {limits.STEPS} "
                             "(split it into several suites)")
        return self


def names_in(directory: Path) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.yaml"))


def load_named(model: type[Model], directory: Path, name_or_path: str | Path, what: str) -> Model:
    """`NAME` (directory/NAME.yaml) or a path to a file, validated by `model`, its path kept in it."""
    path = Path(name_or_path)
    if not path.suffix:
        path = directory / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown {what} {str(name_or_path)!r}; known: {', '.join(names_in(directory))}")
    return load(model, path).model_copy(update={"path": path})


def load_suite(name_or_path: str | Path) -> Suite:
    return load_named(Suite, SUITES, name_or_path, "suite")


# ----------------------------------------------------------------------------------------- images

Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")]


class ImageSpec(Strict):
    tag: Annotated[str, Field(pattern=r"^[\w.{}:-]+$")]   # formatted from envs/common/pins.yaml
    edfs: dict[Name, dict[Literal["cxi", "aws_ofi_nccl"], bool]] = {}   # EDF name -> its hooks


class ImagesFile(Strict):
    registry: Annotated[str, Field(pattern=r"^[a-z0-9.-]+(:\d+)?(/[a-z0-9._-]+)+$")]   # host[:port]/path
    images: dict[Name, ImageSpec]
