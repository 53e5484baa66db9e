"""Spack tier: the recipes in repo/. Nothing is built here except mpi-pingpong (slurm tier).

Build arguments are read off the package objects of the concrete GH200 env, as Spack would pass
them, and compared with the seed's hand-written builds (seeds 000 and 002).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commstack.paths import TOP

pytestmark = pytest.mark.spack

SCRIPTS = Path(__file__).parent / "scripts"  # run inside `spack python`, for these tests only
RECIPES = sorted(p.parent.name.replace("_", "-") for p in (TOP / "repo").glob("spack_repo/commstack/packages/*/package.py"))

# The documented variant combinations beyond what the envs hold (docs/recipes.md), per context.
COMBINATIONS = {
    "gh200-ompi": ["osu-micro-benchmarks ~cuda", "nccl-tests ~mpi", "mpi-pingpong ~cuda"],
}


def run_script(spack, env_copy: Path, name: str, *args: str) -> dict:
    out = env_copy / f"{name}-out.json"
    spack("python", str(SCRIPTS / f"{name}.py"), str(out), *args, env_dir=env_copy)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def build_args(spack, concrete) -> dict:
    env = concrete["gh200-ompi"]  # its staged copy holds the spack.lock just concretized
    return run_script(spack, env.copy, "build_args", "openmpi", "osu-micro-benchmarks", "nccl-tests", "mpi-pingpong")


@pytest.mark.parametrize("recipe", RECIPES)
def test_info(spack, staged, recipe):
    out = spack("info", recipe, env_dir=staged / "envs" / "gh200-ompi").stdout
    first = out.splitlines()[0].split()
    assert first[-1] == recipe and first[0].endswith("Package:") and "Preferred version:" in out


def test_every_version_of_ours_has_a_sha256_or_commit(spack, staged):
    versions = run_script(spack, staged / "envs" / "gh200-ompi", "versions")
    assert set(versions) == set(RECIPES)
    unpinned = [f"{name}@{v}" for name, vs in versions.items() for v, how in vs.items() if not how]
    assert not unpinned, f"versions without a sha256 or commit: {unpinned}"
    assert versions["nccl-tests"] == {"2.17.1": ["sha256"]}
    assert versions["mpi-pingpong"] == {"1.2": ["commit"], "1.1": ["commit"], "1.0": ["commit"]}


def test_a_version_without_checksum_is_caught(spack, tmp_path):
    from commstack.spack.envs import stage
    staged = stage(tmp_path)
    recipe = staged / "repo" / "spack_repo" / "commstack" / "packages" / "nccl_tests" / "package.py"
    recipe.write_text(recipe.read_text().replace('    version("2.17.1"', '    version("2.18.0")\n    version("2.17.1"'))
    versions = run_script(spack, staged / "envs" / "gh200-ompi", "versions")
    assert versions["nccl-tests"]["2.18.0"] == []


@pytest.mark.parametrize("context", COMBINATIONS)
def test_documented_combinations_concretize(spack, tmp_path, concrete, context):
    """Each combination concretizes in the env's context, as `bin/commstack lock` concretizes the env
    (plain Spack stops on a host that is not the node): the env's roots replaced by the combinations,
    each alone (unify: false; the env's roots hold the other value of the variant)."""
    from commstack.spack.envs import concretize_all, env_dir, stage
    root = next(n for n in concrete[context].nodes if n["name"] in concrete[context].roots)
    node = f"arch=linux-{root['os']}-{root['target']}"  # roots need the arch (envs/common/ompi.yaml)
    top = stage(tmp_path)
    manifest = top / env_dir(context) / "spack.yaml"
    text = manifest.read_text()
    specs = text[text.index("  specs:"):text.index("  # `spack env activate")]
    manifest.write_text(text.replace(specs, "  specs:\n" + "".join(f"  - {c} {node}\n" for c in COMBINATIONS[context])
                                     + "  concretizer:\n    unify: false\n"))
    nodes = concretize_all(spack, [context], top)[context].nodes
    for combination in COMBINATIONS[context]:
        name, variant = combination.split()
        hits = [n for n in nodes if n["name"] == name and n["variants"][variant[1:]] is (variant[0] == "+")]
        assert hits and {n["target"] for n in hits} == {"neoverse_v2"}, (combination, nodes)


def test_openmpi_configure_is_the_seed_build(build_args):
    a = build_args["openmpi"]
    prefix, args = a["prefix"], a["configure"]
    # seed 000: --with-ofi --with-ucx --enable-oshmem --with-cuda=<cuda> --with-cuda-libdir=<cuda>/lib64/stubs
    assert f"--with-ofi={prefix['libfabric']}" in args and f"--with-ucx={prefix['ucx']}" in args
    assert "--enable-oshmem" in args and f"--with-cuda={prefix['cuda']}" in args
    assert [x for x in args if x.startswith("--with-cuda-libdir=")] == [f"--with-cuda-libdir={prefix['cuda']}/lib64/stubs"]
    assert "--with-cma" in args and "--with-slurm" in args and f"--with-pmix={prefix['pmix']}" in args


def test_osu_configure_links_cuda_from_the_stubs(build_args):
    a = build_args["osu-micro-benchmarks"]
    cuda, args = a["prefix"]["cuda"], a["configure"]
    assert f"CC={a['prefix']['openmpi']}/bin/mpicc" in args
    assert "--enable-cuda" in args and f"--with-cuda-include={cuda}/include" in args
    assert f"--with-cuda-libpath={cuda}/lib64" in args
    assert f"LDFLAGS=-lrt -L{cuda}/lib64/stubs" in args and "LIBS=-lcuda -lnvidia-ml" in args
    assert not any(x == "LDFLAGS=-lrt" for x in args)
    assert any(x.startswith("NVCCFLAGS=") and "code=sm_90" in x for x in args)


def test_nccl_tests_make_is_mpi_for_sm90(build_args):
    a = build_args["nccl-tests"]
    p = a["prefix"]
    assert a["make"] == [f"CUDA_HOME={p['cuda']}", f"NCCL_HOME={p['nccl']}", f"MPI_HOME={p['openmpi']}", "MPI=1"]
    assert "arch=compute_90,code=sm_90" in a["env"]["NVCC_GENCODE"]
    assert "sm_80" not in a["env"]["NVCC_GENCODE"]


def test_pingpong_make_is_cuda_with_the_env_mpi(build_args):
    a = build_args["mpi-pingpong"]
    p = a["prefix"]
    assert a["make"] == [f"MPICC={p['openmpi']}/bin/mpicc", "CUDA=1", f"CUDA_HOME={p['cuda']}"]


@pytest.fixture(scope="module")
def twin_build_args(spack, concrete) -> dict:
    return run_script(spack, concrete["x86-ompi"].copy, "build_args", "libfabric", "pmix", "prrte", "openmpi",
                      "aws-ofi-nccl", "osu-micro-benchmarks")


@pytest.mark.parametrize("env", ["gh200-ompi", "x86-ompi"])
def test_libfabric_loads_cuda_and_gdrcopy_at_run_time(spack, concrete, env):
    """seed 000 --enable-cuda-dlopen --enable-gdrcopy-dlopen: builtin's --with-cuda alone links the
    driver, and configure fails where none is installed (found by x86-ompi's first build)."""
    args = run_script(spack, concrete[env].copy, "build_args", "libfabric")["libfabric"]["configure"]
    assert {"--enable-cuda-dlopen", "--enable-gdrcopy-dlopen"} <= set(args), args


def test_twin_finds_debian_zlib_and_libevent(twin_build_args):
    """Debian keeps libz and libevent in /usr/lib/x86_64-linux-gnu: PMIx's, PRRTE's and Open MPI's
    configure look in /usr/lib and /usr/lib64 only (found by x86-ompi's first build)."""
    assert "--with-zlib-libdir=/usr/lib/x86_64-linux-gnu" in twin_build_args["pmix"]["configure"]
    for pkg in ("prrte", "openmpi"):
        assert "--with-libevent-libdir=/usr/lib/x86_64-linux-gnu" in twin_build_args[pkg]["configure"], pkg


def test_twin_builds_without_nvcc_and_static_cudart(twin_build_args, build_args):
    osu = twin_build_args["osu-micro-benchmarks"]["configure"]
    assert "--enable-cuda=basic" in osu and "--enable-cuda" not in osu
    assert "--enable-cuda" in build_args["osu-micro-benchmarks"]["configure"]   # gh200-ompi: the kernels too
    assert "--enable-cudart-dynamic" in twin_build_args["aws-ofi-nccl"]["configure"]


@pytest.fixture(scope="module")
def cray_build_args(spack, concrete) -> dict:
    return run_script(spack, concrete["gh200-cray"].copy, "build_args", "osu-micro-benchmarks", "mpi-pingpong")


@pytest.mark.parametrize("pkg", ["osu-micro-benchmarks", "mpi-pingpong"])
def test_cray_mpich_dependents_link_the_gtl(cray_build_args, pkg):
    """CUDA-aware cray-mpich: every link of a dependent carries libmpi_gtl_cuda (builtin gtl_lib)."""
    a = cray_build_args[pkg]
    gtl = "/opt/cray/pe/mpich/8.1.30/gtl/lib"  # next to the external's ofi/gnu/12.3 prefix
    assert a["prefix"]["cray-mpich"] == "/opt/cray/pe/mpich/8.1.30/ofi/gnu/12.3"
    assert a["env"]["SPACK_LDLIBS"].split() == ["-lmpi_gtl_cuda"], a["env"]
    assert a["env"]["SPACK_LDFLAGS"].split() == [f"-L{gtl}", f"-Wl,-rpath,{gtl}"]  # Spack's compiler wrapper adds them


def test_audit_packages(spack, staged):
    proc = spack("audit", "packages", *RECIPES, env_dir=staged / "envs" / "gh200-ompi", check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_style_of_recipes(spack):
    recipes = sorted(str(p) for p in (TOP / "repo").glob("spack_repo/*/packages/*/package.py"))
    tools = Path(sys.executable).parent  # black, isort and flake8 come with requirements/dev.txt
    # docs/recipes.md#style: why not plain `spack style` (mypy checks Spack's own code; flake8's rules)
    proc = spack("-C", str(TOP / ".spack"), "style", "--skip", "mypy,flake8", *recipes, check=False,
                 extra_env={"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0 and "checks were clean" in proc.stdout, proc.stdout + proc.stderr
    # flake8 with spack-packages' recipe rules: `spack style` grants them only to var/spack/
    lint = subprocess.run([str(tools / "flake8"), "--config", str(TOP / "repo" / ".flake8"), *recipes],
                          capture_output=True, text=True, timeout=300)
    assert lint.returncode == 0, lint.stdout
