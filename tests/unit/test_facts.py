"""Stack facts from the real MPI on this machine."""

import shutil
import subprocess
from pathlib import Path

import pytest

from commstack.run.facts import mpi_facts, node_facts


@pytest.mark.skipif(not shutil.which("mpicc"), reason="no mpicc (ci/install-deps.sh installs Open MPI)")
def test_mpi_facts_of_a_real_binary(tmp_path):
    exe = tmp_path / "pp"
    subprocess.run(["make", "-s", "-C", str(Path(__file__).resolve().parents[2] / "src" / "mpi-pingpong"),
                    "-B", f"OUT={exe}"], check=True)
    facts = mpi_facts(str(exe))
    version = subprocess.run(["ompi_info", "--version"], capture_output=True, text=True).stdout
    assert facts["mpi_library"] == "Open MPI" and f"v{facts['mpi_version']}" in version
    assert facts["cuda_aware"] is False and "btl:tcp" in facts["components"]
    assert Path(facts["libmpi"]).name.startswith("libmpi.so")


def test_node_facts_name_this_machines_nics():
    facts = node_facts()
    assert facts["nics"] and "lo" not in facts["nics"] and facts["gpus"] == []
