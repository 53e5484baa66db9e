"""`bin/commstack preflight ENV`: before `spack install` on a real system, does every external the env names
exist here (prefix or module), at the version it claims? Versions Spack's detection cannot read, or reads wrong,
come from the tool a user would ask (READERS; docs/environments.md#before-spack-install-preflight)."""

from __future__ import annotations

import mmap
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from commstack import exits
from commstack.errors import CommstackError
from commstack.paths import TOP
from commstack.spack import Spack, output
from commstack.spack.envs import PURPOSE, env_dir
from commstack.spack.trust import check_env


class VersionReadError(CommstackError):
    """A version command's output is not the format its reader knows; quotes the line at fault."""


@dataclass
class Found:
    version: str | None  # None: nothing found
    source: str          # what was read ("/usr/bin/ldd --version"), or why nothing was found


# ---- parsers of real outputs (tests/unit/test_preflight_readers.py feeds them recorded ones) -------

def _read(text: str, pattern: str, known: tuple[str, ...], what: str) -> re.Match:
    """The first line's match of `pattern`; every later line must match one of `known`."""
    line = text.splitlines()[0] if text.strip() else ""
    m = re.fullmatch(pattern, line.strip())
    if m is None:
        raise VersionReadError(f"{what}: unknown first line {line!r}")
    for line in text.strip().splitlines()[1:]:
        if not any(re.fullmatch(p, line.strip()) for p in known):
            raise VersionReadError(f"{what}: unknown line {line!r}")
    return m


#: GNU's licence text under ldd's version line (C locale)
LDD_KNOWN = (r"Copyright \(C\) \d{4} Free Software Foundation, Inc\.",
             r"This is free software; see the source for copying conditions\.\s+There is NO",
             r"warranty; not even for MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE\.",
             r"Written by [\w ,]+\.")


def parse_ldd(text: str) -> str:
    """`ldd --version` of glibc: 'ldd (Debian GLIBC 2.36-9+deb12u14) 2.36', then GNU's licence text."""
    return _read(text, r"ldd \([^()]*\) (\d+\.\d+(?:\.\d+)?)", LDD_KNOWN, "ldd --version").group(1)


def parse_sinfo(text: str) -> str:
    """`sinfo -V`: 'slurm 24.05.5' (SchedMD's build), 'slurm-wlm 22.05.8' (Debian's), one line."""
    lines = text.strip().splitlines()
    if len(lines) != 1:
        raise VersionReadError(f"sinfo -V: one line expected, got {len(lines)}: {text.strip()[:200]!r}")
    return _read(text, r"slurm(?:-wlm)? (\d+\.\d+\.\d+)", (), "sinfo -V").group(1)


#: under `ucx_info -v`'s version line: the source it was built from, its configure line
UCX_KNOWN = (r"# Git branch '[^']*', revision [0-9a-f]+", r"# Configured with: .*")


def parse_ucx_info(text: str) -> str:
    """`ucx_info -v`: '# Version 1.13.1', the git branch and revision, the configure line."""
    return _read(text, r"# Version (\d+\.\d+\.\d+)", UCX_KNOWN, "ucx_info -v").group(1)


#: the banner's first line, the tool named as it was called: nvcc's, or ptxas's (the same toolkit's banner)
NVCC_TOOLS = r"[\w.-]+: NVIDIA \(R\) (?:Cuda compiler driver|Ptx optimizing assembler)"
RELEASE = re.compile(r"Cuda compilation tools, release (\d+\.\d+), V(\d+\.\d+\.\d+)")
NVCC_KNOWN = (r"Copyright \(c\) \d{4}-\d{4} NVIDIA Corporation", r"Built on \S+", r"Build cuda_\S+")


def parse_nvcc(text: str) -> tuple[str, str]:
    """`nvcc --version`: the toolkit's release ('12.8', what Spack's cuda@12.8.1 is a release of) and
    the compiler's own version ('12.8.93'). Every line must be one nvcc prints."""
    _read(text, NVCC_TOOLS, (RELEASE.pattern, *NVCC_KNOWN), "nvcc --version")
    release = RELEASE.search(text)
    if release is None:
        raise VersionReadError(f"nvcc --version: no 'Cuda compilation tools, release' line in {text.strip()[:300]!r}")
    return release.group(1), release.group(2)


def parse_nccl_header(text: str) -> str:
    """nccl.h's NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH (and NCCL_SUFFIX, '' in a release)."""
    parts = {}
    for key in ("MAJOR", "MINOR", "PATCH", "SUFFIX"):
        hits = re.findall(rf"^#define NCCL_{key}[ \t]+(\S+)[ \t]*$", text, re.M)
        if len(hits) != 1:
            raise VersionReadError(f"nccl.h: {len(hits)} '#define NCCL_{key}' lines, one expected")
        parts[key] = hits[0]
    numbers = all(parts[k].isdigit() for k in ("MAJOR", "MINOR", "PATCH"))
    if not numbers or not re.fullmatch(r'"[^"]*"', parts["SUFFIX"]):
        raise VersionReadError(f"nccl.h: version defines that are not numbers and a string: {parts}")
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}{parts['SUFFIX'].strip(chr(34))}"


NCCL_BANNER = re.compile(rb"NCCL version (\d+\.\d+\.\d+)\+cuda")


def nccl_library_version(lib: Path) -> str | None:
    """The version libnccl prints at init ('NCCL version 2.25.1+cuda12.2'), read from the library."""
    if lib.stat().st_size == 0:  # nothing to map
        return None
    with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        m = NCCL_BANNER.search(data)
        return m.group(1).decode() if m else None


# ---- readers: an external's prefix to the version found there ---------------------------------------

def _tool_version(prefix: Path, name: str, flag: str, parse: Callable[[str], str | tuple[str, str]],
                  extra_env: dict | None = None) -> Found:
    """The version `PREFIX/bin/NAME FLAG` prints, as `parse` reads it (nvcc's: the release and its compiler's)."""
    exe = prefix / "bin" / name
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        return Found(None, f"no {prefix}/bin/{name}")
    read = parse(output([str(exe), flag], 60, VersionReadError, extra_env))
    if isinstance(read, tuple):
        return Found(read[0], f"{exe} {flag}: release {read[0]}, V{read[1]}")
    return Found(read, f"{exe} {flag}")


def read_glibc(prefix: Path) -> Found:
    return _tool_version(prefix, "ldd", "--version", parse_ldd)


def read_slurm(prefix: Path) -> Found:
    # sinfo reads a configuration before it answers even -V, and where none is found it asks DNS for
    # one (configless Slurm); a minimal one of our own makes -V answer on any host, cluster or not
    with tempfile.TemporaryDirectory(prefix="commstack-preflight-") as tmp:
        conf = Path(tmp) / "slurm.conf"
        conf.write_text("ClusterName=preflight\nSlurmctldHost=localhost\n")
        return _tool_version(prefix, "sinfo", "-V", parse_sinfo, {"SLURM_CONF": str(conf)})


def read_ucx(prefix: Path) -> Found:
    """Spack's ucx recipe has no detection (no `executables`): ucx_info says the version."""
    return _tool_version(prefix, "ucx_info", "-v", parse_ucx_info)


def read_cuda(prefix: Path) -> Found:
    return _tool_version(prefix, "nvcc", "--version", parse_nvcc)


#: where a distribution or a wheel puts libnccl under its prefix
NCCL_LIB_DIRS = ("lib", "lib64", "lib/*-linux-gnu")


def read_nccl(prefix: Path) -> Found:
    header = prefix / "include" / "nccl.h"
    if header.is_file():
        return Found(parse_nccl_header(header.read_text(errors="replace")), str(header))
    libs = sorted(p for d in NCCL_LIB_DIRS for p in prefix.glob(f"{d}/libnccl.so*") if p.is_file())
    for lib in libs:
        if version := nccl_library_version(lib):
            return Found(version, f"{lib} (its 'NCCL version' banner)")
    return Found(None, f"no {header}, and no libnccl.so* under {prefix}/{{{','.join(NCCL_LIB_DIRS)}}}"
                       + (" with a version banner" if libs else ""))


#: the Cray PE's layout, the one its cray-mpich modulefiles point at: mpich/VERSION/ofi/COMPILER/CVERSION.
#: The version is not in a header (cray-mpich 8's mpi.h says MPICH 3.4a2) nor printed by a tool.
CRAY_PE_MPICH = re.compile(r"/mpich/(\d+\.\d+\.\d+)/(?:ofi|ucx)/[^/]+/[^/]+/?")


def read_cray_mpich(prefix: Path) -> Found:
    m = CRAY_PE_MPICH.search(str(prefix))
    if m is None:
        return Found(None, f"{prefix} is not in the Cray PE's layout .../mpich/VERSION/ofi/COMPILER/CVERSION")
    libs = sorted(p.name for p in (prefix / "lib").glob("libmpi*.so*") if p.is_file())
    if not libs:
        return Found(None, f"no libmpi*.so in {prefix}/lib")
    return Found(m.group(1), f"the Cray PE directory of {prefix}, holding lib/{libs[0]}")


READERS: dict[str, Callable[[Path], Found]] = {
    "glibc": read_glibc, "slurm": read_slurm, "cuda": read_cuda, "nccl": read_nccl,
    "cray-mpich": read_cray_mpich, "ucx": read_ucx}


def agrees(claim: str, found: str) -> bool:
    """Whether a found version is the claimed one, as far as the reader sees: nccl.h has no package
    release (2.25.1 of 2.25.1-1), nvcc only the toolkit's release (12.8 of 12.8.1)."""
    a, b = re.split(r"[.-]", claim.lstrip("=")), re.split(r"[.-]", found)
    n = min(len(a), len(b))
    return a[:n] == b[:n]


# ---- the check ------------------------------------------------------------------------------------

@dataclass
class ExternalCheck:
    name: str
    claims: str
    prefix: str | None
    modules: list[str]
    problems: list[str]
    found: list[str] | None  # versions found at the prefix; None: not looked (the prefix is missing)
    note: str | None = None  # where the version was read

    def line(self) -> str:
        where = self.prefix or ", ".join(self.modules) or "?"
        seen = f" (found {', '.join(self.found)}: {self.note})" if self.found else ""
        state = "FAIL: " + "; ".join(self.problems) if self.problems else "ok" + seen
        return f"{self.name}@{self.claims} at {where}: {state}"


def check_version(c: ExternalCheck, detected: list[str] | None) -> None:
    """The found version against the claim: by our reader where there is one, else Spack's detection."""
    expected = c.claims.lstrip("=")
    if c.name in READERS:
        try:
            f = READERS[c.name](Path(c.prefix))
        except (VersionReadError, OSError) as e:
            f = Found(None, str(e))
        c.found, c.note = ([f.version] if f.version else []), f.source
    else:
        c.found, c.note = detected or [], c.note or f"Spack's detection of {c.name} at {c.prefix}"
    if not c.found:
        c.problems.append(f"expected {expected}, found none: {c.note}")
    elif not any(agrees(c.claims, v) for v in c.found):
        c.problems.append(f"expected {expected}, found {', '.join(c.found)} ({c.note})")


def preflight(spack: Spack, env: Path) -> list[ExternalCheck]:
    """Check every external an env uses exists on this machine (prefix or module, and version). Spack's detection
    imports package code: the env's files are checked first (commstack.spack.trust)."""
    check_env(env)
    checks = []
    for r in spack.run_script("preflight", ",".join(READERS), env_dir=env, timeout=600):
        detected = r.pop("detected")
        c = ExternalCheck(**r)
        if c.prefix and not c.problems:  # the prefix is here: is the version?
            check_version(c, detected)
        elif not c.prefix and not c.problems:
            c.problems.append(f"expected {c.claims.lstrip('=')}, found none: no prefix to read a version at")
        checks.append(c)
    return checks


def run(spack: Spack, name: str) -> int:
    print(f"preflight {name}: {PURPOSE[name]}")
    checks = preflight(spack, TOP / env_dir(name))
    for c in checks:
        print(f"  {c.line()}")
    failed = [c for c in checks if c.problems]
    print(f"preflight {name}: {len(checks)} externals, "
          + (f"{len(failed)} missing or at another version: {', '.join(c.name for c in failed)}" if failed
             else "all present at the versions claimed"))
    return exits.FAILED if failed else exits.PASS
