"""The input files and their schemas: systems/<name>.yaml, their references, suites/<name>.yaml and
containers/images.yaml. Each is read once per run, through a YAML loader that refuses aliases (no
alias bombs), and checked by a pydantic model that forbids unknown keys. A bad file gives one
ConfigError naming the file, the key path and what was expected; nothing is launched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PositiveInt, ValidationError,
                      field_validator, model_validator)

from commstack.benchmarks import BENCHMARKS
from commstack.errors import ConfigError, UnknownSystemError
from commstack.paths import SUITES, SYSTEMS

Model = TypeVar("Model", bound=BaseModel)


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader without anchors and aliases: a few lines of `*a` can otherwise expand to gigabytes."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) are not allowed")
        return super().compose_node(parent, index)


def read_yaml(path: Path) -> Any:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None


def load(model: type[Model], path: Path, context: dict | None = None) -> Model:
    """`path` read as YAML and validated by `model`; every problem in one ConfigError."""
    data = read_yaml(path)
    try:
        return model.model_validate(data, context={"path": Path(path), **(context or {})})
    except ValidationError as e:
        raise ConfigError(f"{path}: {e.error_count()} problem{'s' if e.error_count() > 1 else ''}:\n"
                          + "\n".join(_problem(err) for err in e.errors())) from None


def _problem(err: dict) -> str:
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    got = "" if err["type"] in ("missing", "extra_forbidden") else f" (got {err['input']!r:.60})"
    what = {"missing": "required key is missing",
            "extra_forbidden": "unknown key"}.get(err["type"], err["msg"])
    return f"  {where}: {what}{got}"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _one_or_list(v: Any) -> Any:
    return [v] if isinstance(v, (str, int)) else v


# ---------------------------------------------------------------------------------------- systems

class Node(Strict):
    cores: PositiveInt | Literal["auto"] = "auto"     # auto: os.cpu_count() of the harness's machine
    gpus: Annotated[int, Field(ge=0)]
    nics: Annotated[int, Field(ge=0)]
    nic_line_rate_MBps: Annotated[float, Field(gt=0)] | None = None


class LauncherConfig(Strict):
    mpi: Literal["pmix", "pmi2", "cray_shasta", "none"] = "pmix"
    gpu_binding: Literal["none", "localid", "gpus-per-task"] = "none"
    srun_flags: list[str] = []
    salloc_flags: list[str] = []
    mpirun_flags: list[str] = []


class BatchConfig(Strict):
    """What `commstack suite --submit` puts in the job script's #SBATCH lines (with the system's partition)."""

    account: str | None = None
    reservation: str | None = None
    qos: str | None = None
    time: Annotated[str, Field(pattern=r"^(\d+-)?\d+(:\d{2}){0,2}$")] = "01:00:00"   # sbatch --time
    sbatch_flags: list[str] = []


class System(Strict):
    """A system file: the machine a suite runs on, and how steps are launched there."""

    name: str
    description: str = ""
    partition: str | None = None
    nodes: PositiveInt
    node: Node
    launcher: LauncherConfig
    env: dict[str, str] = {}
    batch: BatchConfig = BatchConfig()
    nccl_net_plugin: Literal["ofi"] | None = None   # NCCL must select it; an NCCL step that did not fails
    references: Path | None = None     # resolved against the system file's directory
    path: Path | None = None           # set by load_system, not written in the file

    @field_validator("references", mode="after")
    @classmethod
    def _resolve(cls, v: Path | None, info: Any) -> Path | None:
        base = (info.context or {}).get("path")
        return (base.parent / v).resolve() if v is not None and base else v

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, v: Any) -> Any:
        return {str(k): str(x) for k, x in v.items()} if isinstance(v, dict) else v

    @property
    def cores_per_node(self) -> int:
        return (os.cpu_count() or 1) if self.node.cores == "auto" else self.node.cores

    @property
    def gpus_per_node(self) -> int:
        return self.node.gpus

    @property
    def nics_per_node(self) -> int:
        return self.node.nics

    @property
    def nic_line_rate_MBps(self) -> float | None:
        return self.node.nic_line_rate_MBps


def known_systems() -> list[str]:
    return sorted(p.stem for p in SYSTEMS.glob("*.yaml"))


def load_system(name_or_path: str) -> System:
    """`local` (systems/local.yaml) or a path to a system file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SYSTEMS / f"{name_or_path}.yaml"
    if not path.is_file():
        raise UnknownSystemError(f"unknown system {name_or_path!r}; known: {', '.join(known_systems())}")
    system = load(System, path)
    return system.model_copy(update={"path": path})


# ----------------------------------------------------------------------------------------- suites

Size = Annotated[int | str, Field(description="bytes, or with a K, M or G suffix")]


class StepSpec(Strict):
    """One entry of a suite's `steps:`; expanded per system into concrete steps (run.steps)."""

    benchmark: str
    id: str | None = None
    sizes: tuple[Size, Size] | None = None
    nodes: PositiveInt | Literal["all"] = 1
    node_counts: list[PositiveInt] | dict[Literal["max"], PositiveInt] | None = None
    ranks_per_node: PositiveInt | Literal["nic", "core", "gpu"] = 1
    odd: bool = False
    memory: Annotated[list[Literal["host", "device"]], BeforeValidator(_one_or_list)] = ["host"]
    environments: Annotated[list[str], BeforeValidator(_one_or_list)] = ["native"]
    mode: Annotated[list[Literal["cpu", "staged", "cuda-aware"]], BeforeValidator(_one_or_list)] | None = None
    args: list[str | int | float] = []
    repeats: PositiveInt = 1
    timeout_s: PositiveInt = 600

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

    @field_validator("benchmark")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in BENCHMARKS:
            raise ValueError(f"unknown benchmark {v!r}")
        return v

    @property
    def argv(self) -> list[str]:
        return [str(a) for a in self.args]


class Suite(Strict):
    name: str
    description: str = ""
    device_args: dict[Literal["pt2pt", "one-sided", "collective"], list[str]] = {}
    steps: Annotated[list[StepSpec], Field(min_length=1)]
    path: Path | None = None


def known_suites() -> list[str]:
    return sorted(p.stem for p in SUITES.glob("*.yaml"))


def load_suite(name_or_path: str | Path) -> Suite:
    """`smoke` (suites/smoke.yaml) or a path to a suite file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SUITES / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown suite {str(name_or_path)!r}; known: {', '.join(known_suites())}")
    return load(Suite, path).model_copy(update={"path": path})


# ------------------------------------------------------------------------------------- references

class Tolerance(Strict):
    lower: float = -0.10    # allowed relative change on the bad side
    upper: float = 0.10     # better than this is suspicious


class ReferenceSpec(Strict):
    id: str
    benchmark: str
    tags: dict[str, str | int | bool] = {}
    metric: str
    recorded: Path | None = None        # a recorded real output, relative to the references file
    sizes: list[int] | None = None      # with recorded: the sizes held to it (default: all)
    points: dict[int, float] | None = None
    tolerance: dict[Literal["lower", "upper"], float] = {}

    @model_validator(mode="after")
    def _one_source(self) -> "ReferenceSpec":
        if (self.recorded is None) == (self.points is None):
            raise ValueError("give exactly one of `recorded` (a recorded output) and `points` (size: value)")
        return self


class DiagnosisSpec(Strict):
    benchmark: str
    metric: str
    size: int
    tags: dict[str, str | int | bool] = {}
    recorded: Path | None = None
    value: float | None = None
    within: Annotated[float, Field(gt=0)]
    message: str

    @model_validator(mode="after")
    def _one_source(self) -> "DiagnosisSpec":
        if (self.recorded is None) == (self.value is None):
            raise ValueError("give exactly one of `recorded` and `value`")
        return self


class ReferencesFile(Strict):
    system: str
    tolerance: Tolerance = Tolerance()
    unstable_spread: Annotated[float, Field(gt=0)] = 0.10
    references: list[ReferenceSpec]
    diagnoses: list[DiagnosisSpec] = []


# ----------------------------------------------------------------------------------------- images

class ImageSpec(Strict):
    tag: str                                            # formatted from envs/common/pins.yaml
    edfs: dict[str, dict[Literal["cxi", "aws_ofi_nccl"], bool]] = {}


class ImagesFile(Strict):
    registry: str
    images: dict[str, ImageSpec]
