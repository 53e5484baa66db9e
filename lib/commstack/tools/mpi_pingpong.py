"""mpi-pingpong (src/mpi-pingpong): our own two-rank MPI ping-pong, host or device buffers (modes cpu,
staged, cuda-aware); its format: docs/harness.md#the-formats-read-per-tool. Natively it is the given binary
(--pingpong) or built here with the system MPI's mpicc; in the images it is in the view."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from commstack.errors import BinaryNotFoundError, TruncatedError, UnknownFormatError
from commstack.files import write_atomic
from commstack.paths import TOP
from commstack.tools.lines import VALIDATION_ERROR, Quoted, Sweep, Text, count, cut_row, number, read_output
from commstack.tools.base import IMAGE_VIEW, Benchmark, Column, InSpec, Program, SizeFlags, Tool

NAME = "mpi-pingpong"
COLUMNS = {
    "size": Column("B"),
    "time_s": Column("s", False),
    "bandwidth_GiBps": Column("GiB/s", True, ("bandwidth", "GiB/s", 1.0)),
    "check": Column(None),
}

PP_HEADER = re.compile(r"^# mpi-pingpong v(?P<ver>\S+) mode=(?P<mode>\S+) ranks=2 loops=(?P<loops>\d+) "
                       r"warmup=(?P<warmup>\d+) min=(?P<min>\d+) max=(?P<max>\d+)$")
PP_ROW = re.compile(r"^Transfer size \(B\):\s*(?P<size>\S+), Transfer Time \(s\):\s*(?P<time>\S+), "
                    r"Bandwidth \(GB/s\):\s*(?P<bw>\S+?)(?:, Check: (?P<check>\S+))?$")
PP_END = re.compile(r"^# mpi-pingpong done: (data check FAILED|all sizes passed)$")


def parse_pingpong(text: str) -> Sweep:
    """Our mpi-pingpong, and the OLCF tutorial program it follows (no header, no check column)."""
    return read_output(text, lambda t: [_pingpong_table(t)])[0]


def _pingpong_table(t: Text) -> Sweep:
    sweep = Sweep(TOOL.name, NAME, NAME, None, None,
                  ["size", "time_s", "bandwidth_GiBps"], title_line=t.lines[0])
    for line, lineno in t.lines:
        if (m := PP_HEADER.match(line)):
            if sweep.rows or sweep.version:
                raise UnknownFormatError("header after the first row", line, lineno)
            sweep.version = m.group("ver")
            sweep.meta.update(mode=m.group("mode"), **{k: int(m.group(k)) for k in ("loops", "warmup", "min", "max")})
            sweep.device = None if m.group("mode") == "cpu" else "CUDA"
            sweep.columns.append("check")
            sweep.complete = False
            continue
        if sweep.complete:
            raise UnknownFormatError("output after the end line", line, lineno)
        if (m := PP_END.match(line)):
            sweep.complete = True
            sweep.meta["summary"] = m.group(1)
            continue
        if VALIDATION_ERROR.match(line):
            sweep.error_lines.append(Quoted(line, lineno))
            continue
        if (m := PP_ROW.match(line)):
            if (m.group("check") is None) != ("check" not in sweep.columns):
                raise UnknownFormatError("check column does not match the header", line, lineno)
            row = {"size": count(m.group("size"), line, lineno), "time_s": number(m.group("time"), line, lineno),
                   "bandwidth_GiBps": number(m.group("bw"), line, lineno)}
            if m.group("check"):
                if m.group("check") not in ("Pass", "Fail"):
                    raise cut_row(t, line, lineno, f"check is {m.group('check')!r}, not Pass or Fail")
                row["check"] = m.group("check")
            if sweep.rows and row["size"] != sweep.rows[-1]["size"] * 2:
                raise UnknownFormatError(f"size {row['size']} after {sweep.rows[-1]['size']}: the sweep doubles "
                                         f"the size, so rows are missing or out of order", line, lineno)
            sweep.rows.append(row)
            sweep.row_lines.append(Quoted(line, lineno))
            continue
        if line.startswith("Transfer size (B):"):
            raise cut_row(t, line, lineno, "not a complete mpi-pingpong row")
        raise UnknownFormatError("not an mpi-pingpong line", line, lineno)
    if not sweep.rows:
        raise TruncatedError("the output ends before the first row", *t.lines[-1])
    return sweep


def title(line: str) -> Benchmark | None:
    return BENCHMARKS[NAME] if PP_HEADER.match(line) or PP_ROW.match(line) else None


def program(b: Benchmark, p: Program) -> list[str]:
    exe = f"{IMAGE_VIEW}/bin/{NAME}" if p.container else p.home
    return [exe, "-m", p.mode, *p.size_args, *p.args]


def native(binaries: Any) -> str:
    if binaries.pingpong:
        if not Path(binaries.pingpong).is_file():
            raise BinaryNotFoundError(f"--pingpong {binaries.pingpong}: no such file")
        return binaries.pingpong
    out = binaries.build_dir / NAME
    if out.is_file():
        return str(out)
    if not shutil.which("mpicc"):
        raise BinaryNotFoundError("no mpicc to build mpi-pingpong: install an MPI (Debian: libopenmpi-dev)")
    out.parent.mkdir(parents=True, exist_ok=True)
    # make -C changes directory: a relative --results would put OUT under src/mpi-pingpong
    proc = subprocess.run(["make", "-C", str(TOP / "src" / NAME), "-B", f"OUT={out.resolve()}"], capture_output=True,
                          timeout=300)
    write_atomic(out.parent / "build.log", proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise BinaryNotFoundError(f"building mpi-pingpong failed (log: {out.parent / 'build.log'})")
    return str(out)


def planned(binaries: Any) -> str:
    return native(binaries) if binaries.pingpong else str(binaries.build_dir / NAME)


TOOL = Tool(NAME, NAME, "mpi", "mpi", COLUMNS, "$PINGPONG", program, lambda text: [parse_pingpong(text)], title,
            native=native, planned=planned, modes=("cpu", "staged", "cuda-aware"), printed_range=("min", "max"),
            in_env=InSpec(NAME, f"bin/{NAME}"), given=lambda binaries: "--pingpong" if binaries.pingpong else None,
            env_optional=True)
BENCHMARKS: dict[str, Benchmark] = {
    NAME: Benchmark(NAME, TOOL, (NAME,), "bandwidth_GiBps", SizeFlags(lo_flags=("-b",), hi_flags=("-e",)),
                    (("", (8, 1 << 30)),))}
