"""What the env's view tells without Spack: the machine an ELF binary is for, and the record's words for
where a binary came from (the env's own checks run through Spack in tests/spack/test_env_run.py)."""

import platform
import shutil
import struct
import sys
from pathlib import Path

from commstack.results.report import binary_source
from commstack.spack.view import ELF_MACHINES, elf_machine


def test_the_elf_machine_of_real_binaries_is_this_hosts():
    for exe in (shutil.which("true"), sys.executable):
        assert elf_machine(Path(exe).resolve()) == platform.machine()


def test_a_script_or_a_short_file_is_no_elf(tmp_path):
    (tmp_path / "s").write_text("#!/bin/sh\necho hi\n")
    (tmp_path / "short").write_bytes(b"\x7fELF\x02")
    assert elf_machine(tmp_path / "s") is None and elf_machine(tmp_path / "short") is None


def test_the_machine_is_read_from_the_header_in_its_byte_order(tmp_path):
    """A real binary's header with its e_machine set to aarch64's (183), little and big endian."""
    head = bytearray(Path(shutil.which("true")).resolve().read_bytes()[:64])
    head[18:20] = struct.pack("<H", 183)
    (tmp_path / "le").write_bytes(bytes(head))
    head[5], head[18:20] = 2, struct.pack(">H", 183)
    (tmp_path / "be").write_bytes(bytes(head))
    assert elf_machine(tmp_path / "le") == elf_machine(tmp_path / "be") == ELF_MACHINES[183] == "aarch64"


def test_the_report_says_where_a_binary_came_from():
    spec = {"path": "/v/bin/mpi-pingpong", "env": "/e", "lock_sha256": "ab" * 32, "spec": "mpi-pingpong@1.2/qprokgz",
            "mpi": "openmpi@5.0.8/abcdefg"}
    assert binary_source(spec) == ("mpi-pingpong@1.2/qprokgz of env /e (lock sha256 abababababab, "
                                   "MPI openmpi@5.0.8/abcdefg)")
    given = {"path": "/o/pt2pt/osu_bw", "env": "/e", "from": "--osu-prefix, which wins over the env"}
    assert binary_source(given) == "--osu-prefix, which wins over the env"
    assert binary_source({"path": "/usr/bin/fi_pingpong"}) == ""
