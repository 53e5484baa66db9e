"""Where a run's OSU comes from, and what its record and dry run say: --osu-prefix as typed wins over an env's
view, which wins over COMMSTACK_OSU_PREFIX, which wins over the local env's (docs/harness.md). The variable
used to fill --osu-prefix's default: with it set, --env never gave OSU, and the record said "--osu-prefix,
which wins over the env" though no one typed it."""

import os
import subprocess
from pathlib import Path

from commstack.run.binaries import Binaries
from commstack.spack.view import EnvView, Node
from commstack.tools.osu import TOOL
from commstack.tools.osu_install import MPI_DIR

TOP = Path(__file__).resolve().parents[2]


def osu_install(prefix: Path) -> Path:
    """A directory that is an OSU install as far as a run looks before it launches: its osu_latency."""
    (prefix / MPI_DIR / "pt2pt").mkdir(parents=True)
    (prefix / MPI_DIR / "pt2pt" / "osu_latency").write_bytes(b"")
    return prefix


def dry_run(*args: str, variable: Path | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "COMMSTACK_OSU_PREFIX"}
    env.update({"COMMSTACK_OSU_PREFIX": str(variable)} if variable else {})
    proc = subprocess.run([str(TOP / "bin" / "commstack"), "run", "--dry-run", "--pingpong", "/bin/true", *args],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines()


def test_the_variable_gives_osu_where_nothing_is_typed_and_the_dry_run_says_so(tmp_path):
    var = osu_install(tmp_path / "from-variable")
    lines = dry_run(variable=var)
    assert f"# osu: {var / MPI_DIR}, from $COMMSTACK_OSU_PREFIX" in lines
    osu = [line for line in lines if "/osu_" in line]
    assert osu and all(f" {var / MPI_DIR}/" in line for line in osu)


def test_a_typed_osu_prefix_wins_over_the_variable(tmp_path):
    var, typed = osu_install(tmp_path / "from-variable"), osu_install(tmp_path / "typed")
    lines = dry_run("--osu-prefix", str(typed), variable=var)
    assert f"# osu: {typed / MPI_DIR}, from --osu-prefix" in lines
    osu = [line for line in lines if "/osu_" in line]
    assert osu and all(f" {typed / MPI_DIR}/" in line and str(var) not in line for line in osu)


def env_with_osu(tmp_path: Path) -> EnvView:
    """An installed env whose view holds OSU (what commstack.spack.view reads through Spack, here made whole)."""
    view = osu_install(tmp_path / "view")
    osu = Node(name="osu-micro-benchmarks", version="7.5.1", hash="abcdefg1234", prefix=str(tmp_path / "store"),
               installed=True, external=False, target="x86_64_v3", family="x86_64", runs_here=True,
               in_view=str(view), mpi=False, root=True)
    return EnvView(path=tmp_path / "env", lock_sha256="ab" * 32, view=view, nodes=(osu,))


def test_the_envs_view_wins_over_the_variable_and_a_typed_prefix_over_the_env(tmp_path, monkeypatch):
    """With an env (--env or the system's install) its view gives OSU, whatever COMMSTACK_OSU_PREFIX says; only
    --osu-prefix as typed wins over it, and the record says which. Through Spack and Slurm:
    tests/spack/test_env_run.py."""
    env, var, typed = env_with_osu(tmp_path), osu_install(tmp_path / "from-variable"), osu_install(tmp_path / "typed")
    monkeypatch.setenv("COMMSTACK_OSU_PREFIX", str(var))
    binaries = Binaries(env=env)
    assert binaries.native(TOOL) == str(env.view / MPI_DIR)
    assert binaries.sources["osu"] == {"env": str(env.path), "lock_sha256": "ab" * 32,
                                       "spec": "osu-micro-benchmarks@7.5.1/abcdefg"}
    binaries = Binaries(env=env, osu_prefix=str(typed))
    assert binaries.planned(TOOL) == str(typed / MPI_DIR)  # the dry run's look, the same
    assert binaries.native(TOOL) == str(typed / MPI_DIR)
    assert binaries.record(TOOL, str(typed / MPI_DIR), [str(typed / MPI_DIR / "pt2pt" / "osu_bw")]) == {
        "path": str(typed / MPI_DIR / "pt2pt" / "osu_bw"), "env": str(env.path),
        "from": "--osu-prefix, which wins over the env"}
    binaries = Binaries()  # no env: the variable, named as such in the record
    assert binaries.native(TOOL) == str(var / MPI_DIR) and binaries.sources["osu"] == {"from": "$COMMSTACK_OSU_PREFIX"}
