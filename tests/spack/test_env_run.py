"""`commstack run --env ENV`: the benchmarks from an installed env's view, as a user types it.

The offline chain CI runs (no source to fetch): plain `spack -e <repo> install mpi-pingpong` builds our
ping-pong from src/ in the local env, and `bin/commstack run --env <repo>` runs it from the env's view under
the local Slurm; the record names the env, its lock and the spec. Where `bin/commstack setup --mirror DIR` gave
the local env OSU's source tree (as CI's .ci/run does), OSU 7.5.1 is built from it by our recipe too, and the
whole smoke suite passes from the env. Bad envs are refused before anything is launched, each with its named
error and the command that fixes it."""

import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from commstack.paths import TOP
from commstack.results.records import read_run
from commstack import exits
from commstack.spack.envs import stage
from commstack.spack.setup import LOCAL_DEVELOP

pytestmark = pytest.mark.spack
COMMSTACK = TOP / "bin" / "commstack"
VIEW = TOP / ".spack-env" / "view"

def osu_tree() -> Path | None:
    """The OSU source tree `bin/commstack setup --mirror DIR` registered as a `spack develop` tree of the local env."""
    if not LOCAL_DEVELOP.is_file():
        return None
    develop = yaml.safe_load(LOCAL_DEVELOP.read_text())["develop"]
    return Path(develop["osu-micro-benchmarks"]["path"]) if "osu-micro-benchmarks" in develop else None


NO_OSU_TREE = ("no OSU source tree for the local env: `bin/commstack setup --mirror DIR` with a source mirror "
               "that holds osu-micro-benchmarks-7.5.1-src.tar.gz (docs/getting-spack.md) registers one")


def commstack(*args: str, env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    """bin/commstack as a user types it; a variable None in `env` is unset."""
    return subprocess.run([str(COMMSTACK), *args], capture_output=True, text=True, timeout=timeout,
                          env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None})


@pytest.fixture(scope="module")
def local_env_with_pingpong(spack) -> Path:
    """The local env with mpi-pingpong installed by Spack from src/ (offline: our recipe fetches this
    repository's own git history; the compiler and MPI are externals from `bin/commstack setup`)."""
    # libfabric and UCX are the system's (externals): installing them registers them in Spack's database, which
    # is what "installed" means to an env; without it their steps are not-run ("partly installed")
    spack("install", "--fail-fast", "mpi-pingpong", "libfabric", "ucx", env_dir=TOP, timeout=1800)
    return TOP


@pytest.fixture(scope="module")
def local_env_with_osu(spack, local_env_with_pingpong) -> Path:
    """The local env with OSU 7.5.1 too, built by our recipe from the source tree set-up registered (offline)."""
    if osu_tree() is None:
        pytest.skip(NO_OSU_TREE)
    spack("install", "--fail-fast", env_dir=TOP, timeout=3600)  # the whole env, as a user installs it
    return TOP


@pytest.fixture(scope="module")
def osu_prefix(request, spack) -> str:
    """An OSU install prefix: COMMSTACK_OSU_PREFIX's, else the local env's install of it (not its view)."""
    if os.environ.get("COMMSTACK_OSU_PREFIX"):
        return os.environ["COMMSTACK_OSU_PREFIX"]
    request.getfixturevalue("local_env_with_osu")
    return spack("location", "-i", "osu-micro-benchmarks", env_dir=TOP).stdout.strip()


@pytest.mark.slurm
def test_run_env_runs_mpi_pingpong_from_the_local_envs_view(local_env_with_pingpong, slurm_variables, tmp_path):
    """Every binary from the env (COMMSTACK_OSU_PREFIX would not change that, the file's last test; a typed
    --osu-prefix would: the next test)."""
    proc = commstack("run", "--env", str(local_env_with_pingpong), "--results", str(tmp_path / "r"),
                     env={**slurm_variables, "COMMSTACK_OSU_PREFIX": None})
    records = {r.benchmark: r for r in read_run(tmp_path / "r")}
    assert proc.returncode in (exits.PASS, exits.NOT_RUN), proc.stdout + proc.stderr
    pp = records["mpi-pingpong"]
    assert pp.verdict == "pass", proc.stdout
    lock = hashlib.sha256((TOP / "spack.lock").read_bytes()).hexdigest()
    assert pp.binary["path"] == str(VIEW / "bin" / "mpi-pingpong")
    assert pp.binary["env"] == str(TOP) and pp.binary["lock_sha256"] == lock
    locked = json.loads((TOP / "spack.lock").read_text())["concrete_specs"]
    pp_hash = next(h for h, s in locked.items() if s["name"] == "mpi-pingpong")
    assert pp.binary["spec"] == f"mpi-pingpong@{locked[pp_hash]['version']}/{pp_hash[:7]}"
    assert pp.binary["mpi"].startswith("openmpi@")  # the local env's MPI: the system's, an external
    assert pp.commands[0][0] == "srun" and str(VIEW / "bin" / "mpi-pingpong") in pp.commands[0]
    assert pp.repeats[0][-1]["size"] == 1 << 20
    # the lower layers: the system's libfabric and UCX, externals of the local env (in their prefix, not the view)
    for bench, spec, program in (("fi_pingpong", "libfabric", "fi_pingpong"), ("ucx_perftest-tag_lat", "ucx",
                                                                                "ucx_perftest")):
        h = next(h for h, s in locked.items() if s["name"] == spec)
        assert records[bench].verdict == "pass", records[bench].reason
        assert records[bench].binary["spec"] == f"{spec}@{locked[h]['version']}/{h[:7]}"
        assert records[bench].binary["path"] == f"{locked[h]['external']['path']}/bin/{program}"
    # OSU from the env either way: its view's, or not-run naming the env (offline: OSU never installed here)
    osu = [r for r in records.values() if r.tool == "osu"]
    assert osu
    for r in osu:
        if r.verdict == "not-run":
            assert r.error_kind == "env-partly-installed", r.reason
            assert f"env {TOP} is partly installed: osu-micro-benchmarks@7.5.1/" in r.reason
            assert f"`spack -e {TOP} install`" in r.reason
        else:
            assert r.binary["path"].startswith(f"{VIEW}/libexec/osu-micro-benchmarks/mpi/"), r.binary
            assert r.binary["env"] == str(TOP) and r.binary["spec"].startswith("osu-micro-benchmarks@7.5.1/")
    report = (tmp_path / "r" / "report" / "report.md").read_text()
    assert f"| `{pp.step}` | `{VIEW / 'bin' / 'mpi-pingpong'}` | {pp.binary['spec']} of env {TOP} (lock sha256 " \
           f"{lock[:12]}, MPI {pp.binary['mpi']}) |" in report


@pytest.mark.slurm
def test_the_smoke_suite_passes_from_the_local_env_with_osu_built_by_our_recipe(local_env_with_osu, slurm_variables,
                                                                                 tmp_path):
    """CI's offline chain (.ci/run): OSU 7.5.1 built by our recipe (namespace commstack) from the source tree set-up
    registered (its dev_path: no archive, no checksum) on the system's Open MPI; every smoke step passes on the env's
    binaries, and each record names the spec its binary came from."""
    proc = commstack("run", "--env", str(TOP), "--results", str(tmp_path / "r"),
                     env={**slurm_variables, "COMMSTACK_OSU_PREFIX": None})
    assert proc.returncode == exits.PASS, proc.stdout + proc.stderr
    assert re.search(r"^7 steps in [0-9.]+ s: 7 pass$|^7 steps in \d+ min \d+ s: 7 pass$", proc.stdout, re.M), proc.stdout
    locked = {s["name"]: (h, s) for h, s in json.loads((TOP / "spack.lock").read_text())["concrete_specs"].items()}
    osu = locked["osu-micro-benchmarks"][1]
    assert (osu["version"], osu["namespace"], osu["parameters"]["dev_path"]) == ("7.5.1", "commstack", str(osu_tree()))
    mpi_hash, mpi = locked["openmpi"]
    assert mpi["external"], mpi  # the system's Open MPI
    records = read_run(tmp_path / "r")
    assert [r.verdict for r in records] == ["pass"] * 7
    for r in records:
        name = r.binary["spec"].split("@")[0]
        h, node = locked[name]
        assert r.binary["spec"] == f"{name}@{node['version']}/{h[:7]}" and r.binary["env"] == str(TOP), r.binary
    assert {r.binary["spec"].split("@")[0] for r in records} == {"libfabric", "ucx", "mpi-pingpong",
                                                                  "osu-micro-benchmarks"}
    assert {r.binary["mpi"] for r in records if r.tool == "osu"} == {f"openmpi@{mpi['version']}/{mpi_hash[:7]}"}


@pytest.mark.slurm
def test_an_explicit_osu_prefix_wins_over_the_env_and_the_record_says_so(
        local_env_with_pingpong, osu_prefix, slurm_variables, tmp_path):
    proc = commstack("suite", "smoke", "--env", str(TOP), "--osu-prefix", osu_prefix, "--results",
                     str(tmp_path / "r"), "--allow-not-run", env=slurm_variables)
    records = {r.benchmark: r for r in read_run(tmp_path / "r")}
    assert proc.returncode == exits.PASS, proc.stdout + proc.stderr
    bw = records["osu_bw"]
    assert bw.verdict == "pass" and bw.binary["path"] == f"{osu_prefix}/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_bw"
    assert bw.binary["from"] == "--osu-prefix, which wins over the env" and bw.binary["env"] == str(TOP)
    assert "spec" not in bw.binary
    assert records["mpi-pingpong"].binary["spec"].startswith("mpi-pingpong@")  # the rest still from the env


def test_an_env_that_is_not_one_is_refused(tmp_path):
    proc = commstack("run", "--env", str(tmp_path / "none"), "--results", str(tmp_path / "r"))
    assert proc.returncode == exits.USAGE and not (tmp_path / "r").exists()
    assert f"--env {tmp_path / 'none'}: not a Spack env (no spack.yaml); `spack env create -d" in proc.stderr


def test_an_env_never_concretized_is_refused_with_the_command(tmp_path):
    env = tmp_path / "env"
    env.mkdir()
    (env / "spack.yaml").write_text("spack:\n  specs: [mpi-pingpong]\n")
    proc = commstack("run", "--env", str(env), "--dry-run")
    assert proc.returncode == exits.USAGE
    assert f"env {env} was never concretized (no spack.lock): `spack -e {env} concretize`" in proc.stderr


def test_an_env_for_another_target_is_refused_naming_both(tmp_path):
    """gh200-ompi's committed lock is for the GH200 node (neoverse_v2): not for this x86_64 host."""
    proc = commstack("suite", "stack", "--env", str(TOP / "envs" / "gh200-ompi"), "--results", str(tmp_path / "r"))
    assert proc.returncode == exits.USAGE and not (tmp_path / "r").exists(), proc.stdout + proc.stderr
    assert f"env {TOP / 'envs' / 'gh200-ompi'} is built for neoverse_v2 (aarch64: " in proc.stderr
    assert "this host is x86_64" in proc.stderr


def test_a_lock_that_differs_from_its_spack_yaml_is_refused(tmp_path):
    """A copy of gh200-ompi with one more root in spack.yaml than its lock holds: stale, before its target."""
    env = stage(tmp_path / "staged") / "envs" / "gh200-ompi"
    shutil.copy(TOP / "envs" / "gh200-ompi" / "spack.lock", env / "spack.lock")
    text = (env / "spack.yaml").read_text()
    assert "\n  specs:\n" in text
    (env / "spack.yaml").write_text(text.replace("\n  specs:\n", "\n  specs:\n  - zlib\n", 1))
    proc = commstack("run", "--env", str(env), "--dry-run")
    assert proc.returncode == exits.USAGE, proc.stdout + proc.stderr
    assert f"env {env}: its spack.lock differs from its spack.yaml" in proc.stderr
    assert f"`spack -e {env} concretize -f` then `spack -e {env} install`" in proc.stderr


def test_an_env_not_installed_is_refused_with_the_command(spack, tmp_path):
    """An env concretized here whose one spec (a build of mpi-pingpong no one made: its cflags) is not installed."""
    env = tmp_path / "env"
    env.mkdir()
    flag = f"-DCOMMSTACK_NEVER_BUILT_{secrets.token_hex(4)}"
    includes = [TOP / "envs" / "common" / "repos.yaml", *(TOP / ".spack" / f for f in ("repos.yaml", "externals.yaml"))]
    (env / "spack.yaml").write_text(
        "spack:\n  include: [" + ", ".join(str(p) for p in includes) + "]\n"
        f"  specs: ['mpi-pingpong cflags={flag}']\n  packages:\n    mpi: {{buildable: false}}\n")
    spack("concretize", env_dir=env, timeout=900)
    proc = commstack("run", "--env", str(env), "--results", str(tmp_path / "r"))
    assert proc.returncode == exits.USAGE and not (tmp_path / "r").exists(), proc.stdout + proc.stderr
    assert f"env {env} is not installed (none of its 1 roots): `spack -e {env} install`" in proc.stderr


def test_commstack_osu_prefix_does_not_win_over_the_env(local_env_with_pingpong):
    """COMMSTACK_OSU_PREFIX used to fill --osu-prefix's default: with it set, --env never gave OSU. Now only a typed
    --osu-prefix wins over the env: the dry run's OSU is the env's (or the env's reason it has none)."""
    proc = commstack("run", "--env", str(local_env_with_pingpong), "--dry-run",
                     env={"COMMSTACK_OSU_PREFIX": "/nonexistent-osu"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (osu,) = [line for line in proc.stdout.splitlines() if line.startswith("# osu: ")]
    assert f"env {TOP}" in osu and "/nonexistent-osu" not in proc.stdout, proc.stdout


def test_a_binary_of_the_view_another_user_could_change_is_refused_by_name(local_env_with_pingpong):
    """Issue 48: the file the view's link leads to (in the install tree) is what runs, and what is checked."""
    binary = (VIEW / "bin" / "mpi-pingpong").resolve()
    mode = binary.stat().st_mode
    os.chmod(binary, mode | 0o002)
    try:
        proc = commstack("run", "--env", str(TOP), "--dry-run")
    finally:
        os.chmod(binary, mode)
    assert f"# mpi-pingpong: env {TOP}: mpi-pingpong@" in proc.stdout, proc.stdout + proc.stderr
    assert f"{binary} is writable by group or others" in proc.stdout and f"`chmod go-w {binary}`" in proc.stdout
    assert str(VIEW / "bin" / "mpi-pingpong") not in proc.stdout  # no step launches it
