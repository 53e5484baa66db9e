"""What the env's view tells without Spack: the machine an ELF binary is for, the record's words for where a
binary came from, the programs the facts probe takes from it (the env's own checks run through Spack in
tests/spack/test_env_run.py)."""

import os
import platform
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from commstack.paths import TOP
from commstack.results.records import binary_source
from commstack.spack import NO_SPACK, find_spack
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


def _node(name: str, prefix: Path, mpi: bool = False):
    from commstack.spack.view import Node
    return Node(name=name, version="1", hash="abcdefg1234", prefix=str(prefix), installed=True, external=name == "cuda",
                target="x86_64_v3", family="x86_64", runs_here=True, in_view=None, mpi=mpi, root=False)


def test_nodes_without_a_driver_get_the_envs_loadable_stubs_and_open_mpi_no_cuda_accelerator(tmp_path):
    """The twin's OSU +cuda links libcuda.so.1: on a node with no GPU it starts only on the stubs, and with the
    stubs Open MPI's CUDA accelerator opens and breaks MPI_Reduce (MPI_ERR_OTHER, seen with the built twin)."""
    from commstack.run.binaries import Binaries
    from commstack.spack.view import EnvView
    cuda = tmp_path / "cuda"
    env = EnvView(path=tmp_path, lock_sha256="0", view=tmp_path / "view",
                  nodes=(_node("cuda", cuda), _node("openmpi", tmp_path / "ompi", mpi=True)))
    assert Binaries(env=env).without_driver() == {}  # a toolkit without the no-driver names: nothing changes
    stubs = cuda / "lib64" / "stubs" / "no-driver"
    stubs.mkdir(parents=True)
    (stubs / "libcuda.so.1").write_bytes(b"")
    assert Binaries(env=env).without_driver() == {"LD_LIBRARY_PATH": str(stubs), "OMPI_MCA_accelerator": "null"}
    assert Binaries().without_driver() == {}  # no env: Debian's binaries link no libcuda


def test_an_env_with_no_spack_to_read_it_says_so_in_the_one_wording(tmp_path, monkeypatch):
    """`commstack suite --env` where no Spack can be found: exit 2 before anything runs, the words of NO_SPACK."""
    monkeypatch.delenv("SPACK_ROOT", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    if find_spack() is not None:
        pytest.skip(f"this checkout finds a Spack without SPACK_ROOT ({find_spack()}): the error cannot be reached")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "spack.yaml").write_text("spack: {specs: []}\n")
    (tmp_path / "env" / "spack.lock").write_text("{}\n")
    proc = subprocess.run([str(TOP / "bin" / "commstack"), "suite", "smoke", "--system", "local", "--env",
                           str(tmp_path / "env"), "--dry-run", "--slurm", "off"], capture_output=True, text=True,
                          env=dict(os.environ), timeout=300)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr == f"commstack suite: error: --env {tmp_path / 'env'}: {NO_SPACK}\n"


def test_the_facts_probe_runs_the_envs_fi_info_and_ucx_info(tmp_path):
    """With an env, the probe runs the view's fi_info and ucx_info (each tool's `facts`), not those on the nodes'
    PATH, which may be another build's or none: the transports the ucx layer is judged on are the env's UCX's."""
    from commstack.run.binaries import Binaries
    from commstack.run.facts import probe_argv
    from commstack.spack.view import EnvView
    for name, program in (("libfabric", "fi_info"), ("ucx", "ucx_info")):
        (tmp_path / name / "bin").mkdir(parents=True)
        (tmp_path / name / "bin" / program).write_bytes(b"")
    env = EnvView(path=tmp_path, lock_sha256="0", view=tmp_path / "view",
                  nodes=(_node("libfabric", tmp_path / "libfabric"), _node("ucx", tmp_path / "ucx")))
    programs = Binaries(env=env).facts_programs()
    assert programs == {"fi_info": str(tmp_path / "libfabric" / "bin" / "fi_info"),
                        "ucx_info": str(tmp_path / "ucx" / "bin" / "ucx_info")}
    assert probe_argv("/v/bin/ucx_perftest", programs)[-3:] == ["/v/bin/ucx_perftest", *programs.values()]
    assert Binaries().facts_programs() == {}  # no env: the probe's own `command -v`
