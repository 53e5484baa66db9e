"""The options that `run`, `suite`, `screen`, `test` and the pytest plugin (`pytest suites/NAME.yaml`) share,
declared once (as Spack's cmd/common/arguments.py does): a name has one flag, one type, one set of choices and one
help wherever it is given."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from commstack.paths import absolute

#: name (its attribute on the parsed arguments; its flag: --name, '_' as '-') -> add_argument's keywords
OPTIONS = {
    "system": {"default": "local", "help": "systems/NAME.yaml, or a system file (default: local)"},
    "results": {"help": "the run's results directory, new or empty (default: a new results/<date-time>-<id>)"},
    "slurm": {"choices": ("auto", "local", "external", "off"), "default": "auto",
              "help": "auto: a reachable cluster, else start the local one; local: always the local one; external: "
                      "only a reachable cluster; off: no Slurm (steps not run)"},
    "launcher": {"choices": ("srun", "mpirun"), "default": "srun",
                 "help": "mpirun runs on this host without Slurm; only when asked for"},
    "osu_prefix": {"type": absolute,
                   "help": "an OSU micro-benchmarks install (has libexec/osu-micro-benchmarks/mpi), over --env's "
                           "(default: --env's, else $COMMSTACK_OSU_PREFIX, else the local env's when installed)"},
    "pingpong": {"type": absolute, "help": "an mpi-pingpong binary (default: built with the system MPI's mpicc)"},
    "env": {"help": "an installed Spack env (its directory): every benchmark from its view, the MPI steps with its "
                    "MPI (default: the system's install: {env: ...}, else none)"},
    "no_build": {"action": "store_true",
                 "help": "never set up Spack or build OSU: steps without their binaries are not run"},
    "memory": {"choices": ("host", "device"),
               "help": "only the suite steps in this memory (a scaled-down suite on a system without GPUs)"},
    "native_only": {"action": "store_true", "help": "drop a suite's container runs"},
}


def add(add_option: Callable[..., Any], names: Iterable[str] = OPTIONS, **changed: dict[str, Any]) -> None:
    """The named options (default: all, as `run`, `suite` and the pytest plugin take them), through `add_option`
    (argparse's add_argument, or a pytest group's addoption); `changed`: a command's own (screen's --system default)."""
    for name in names:
        add_option(f"--{name.replace('_', '-')}", **{**OPTIONS[name], **changed.get(name, {})})
