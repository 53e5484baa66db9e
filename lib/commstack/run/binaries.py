"""Where the native binaries of a run come from: an option that names one, an installed env's view
(`--env`, a system's `install: {env: ...}`; commstack.spack.view), or each tool's own way (commstack.tools);
and, for the record, which spec of which env each came from."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Callable

from commstack import benchmarks
from commstack.errors import BinaryNotFoundError
from commstack.run.steps import SuiteStep
from commstack.spack import find_spack
from commstack.spack.install import SpackInstallError, install, location
from commstack.spack.view import EnvView
from commstack.tools import TOOLS, Tool


@dataclasses.dataclass
class Binaries:
    """Where the native binaries a run needs are, and what it may do to get them (each tool's `native`
    looks them up, when a step needs one)."""

    osu_prefix: str | None = None  # --osu-prefix as typed: wins over the env (COMMSTACK_OSU_PREFIX does not)
    pingpong: str | None = None    # --pingpong
    build_dir: Path | None = None
    build: bool = True  # may set up Spack and install OSU in the local env (not: --no-build, --dry-run)
    say: Callable[[str], None] = print  # progress of a build, for the terminal
    #: tool name -> its native binary, or why it has none: looked up (and built) once per run
    found: dict[str, str] = dataclasses.field(default_factory=dict)
    missing: dict[str, BinaryNotFoundError] = dataclasses.field(default_factory=dict)  # its kind kept for the record
    env: EnvView | None = None  # --env, or the system's install: {env: ...}: the binaries of its view
    #: tool name -> where its binary came from, for the record (the env, its lock and spec; the option given)
    sources: dict[str, dict] = dataclasses.field(default_factory=dict)

    def resolve(self, s: SuiteStep) -> dict[str, str]:
        """Placeholder -> path for the native binaries of one step."""
        if s.step.environment:
            return {}
        tool = benchmarks.get(s.benchmark).tool
        return {tool.placeholder: self.native(tool)}

    def native(self, tool: Tool) -> str:
        """A tool's native binary or prefix: an option typed that names it wins; else the env's view, where there
        is an env (a tool whose binary it lacks is not-run, mpi-pingpong is built as without one); else the tool's
        own way (commstack.tools; for OSU, COMMSTACK_OSU_PREFIX comes in there, below the env). Once per tool."""
        if tool.name not in self.found and tool.name not in self.missing:
            try:
                self.found[tool.name] = self._from_env(tool) or self._own(tool)
            except BinaryNotFoundError as e:
                self.missing[tool.name] = e
        if tool.name in self.missing:
            raise self.missing[tool.name]
        return self.found[tool.name]

    def _own(self, tool: Tool, plan: bool = False) -> str | None:
        """The tool's own way (`planned` for a dry run: nothing built); for a tool the local Spack env builds, where
        the run names none, that env's install, installed now where the run may build. What named it: sources."""
        way = tool.planned if plan else tool.native
        found = way(self) if way else None
        if found is None and tool.local:
            found = tool.local(*self._local_env(tool.in_env.spec, build=self.build and not plan))
        if found is not None and tool.source:
            self.sources.setdefault(tool.name, {"from": tool.source(self)})
        return found

    def _local_env(self, spec: str, build: bool) -> tuple[str | None, str | None]:
        """The local Spack env's install prefix of `spec`, installed now by the pinned Spack where `build`; else
        None, and why where a build failed."""
        exe = find_spack()
        found = location(exe, spec) if exe else None
        if found or not build:
            return found, None
        try:
            return str(install(spec, self.build_dir / "spack-install.log", self.say)), None
        except SpackInstallError as e:
            return None, str(e).rstrip(".")

    def _from_env(self, tool: Tool) -> str | None:
        """The tool's binary from the env's view; None where there is no env, an option names the binary, or
        (env_optional) the view lacks it: then the tool's own way. Where it came from goes to self.sources."""
        option = tool.given(self)
        if self.env and option:
            self.sources[tool.name] = {"env": str(self.env.path), "from": f"{option}, which wins over the env"}
        elif self.env and tool.in_env:
            try:
                path, self.sources[tool.name] = self.env.program(tool.in_env.spec, tool.in_env.path, tool.name)
                return path
            except BinaryNotFoundError as e:
                if not tool.env_optional:
                    raise
                self.sources[tool.name] = {"env": str(self.env.path), "from": f"the tool's own way: {e}"}
        return None

    def without_driver(self) -> dict[str, str]:
        """What the env's CUDA-aware binaries need on nodes with no GPU (they link libcuda.so.1): the env's driver
        stubs, and Open MPI's CUDA accelerator left out (docs/harness.md#running-an-envs-binaries-env)."""
        cuda = self.env.node("cuda") if self.env else None
        stubs = Path(cuda.prefix) / "lib64" / "stubs" / "no-driver" if cuda else None
        if not stubs or not (stubs / "libcuda.so.1").exists():
            return {}
        self.env.trusted(stubs, f"{cuda.label}'s driver stubs", tree=True)  # every library in it is loadable
        mpi = self.env.mpi()
        return {"LD_LIBRARY_PATH": str(stubs), **({"OMPI_MCA_accelerator": "null"}
                                                  if mpi and mpi.name == "openmpi" else {})}

    def planned(self, tool: Tool) -> str | None:
        """Where a dry run shows the tool's binary: as native() finds it, building nothing; None: nowhere."""
        return self._from_env(tool) or self._own(tool, plan=True)

    def record(self, tool: Tool, home: str, argv: list[str]) -> dict:
        """Where a step's binary came from: its path, and with an env its spec and the env's MPI; a binary of
        the view built for another machine is refused here, before the launch."""
        source = dict(self.sources.get(tool.name, {}))
        binary = next((a for a in argv if a.startswith(home)), home)
        if "spec" in source and self.env:
            self.env.check_machine(Path(binary), source["spec"])
        if self.env and tool.launch == "mpi" and (mpi := self.env.mpi()):
            source["mpi"] = mpi.label
            if pmix := self.env.node("pmix"):  # the PMIx client the ranks load, against srun's PMIx server
                source["pmix"] = pmix.label
        return {"path": binary, **source}

    def facts_programs(self) -> dict[str, str]:
        """The facts probe's programs from the env ({"fi_info": <view>/bin/fi_info, ...}): those the env has;
        the probe finds the others on PATH."""
        found = {}
        for spec in (f for tool in TOOLS.values() for f in tool.facts) if self.env else ():
            name = Path(spec.path).name
            with contextlib.suppress(BinaryNotFoundError):
                found[name] = self.env.program(spec.spec, spec.path, name)[0]
        return found

    def mpirun(self) -> str:
        """The env's mpirun (its MPI's), else the one on PATH."""
        mpi = self.env.mpi() if self.env else None
        found = Path(mpi.in_view or mpi.prefix) / "bin" / "mpirun" if mpi else None
        if not (found and found.is_file()):
            return "mpirun"
        self.env.trusted(found, f"{mpi.label}'s mpirun")
        return str(found)
