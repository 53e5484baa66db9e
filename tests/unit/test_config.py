"""The four input files (system, suite, references, images): a bad one is one ConfigError that
names the file, the key path and what was expected."""

import subprocess
import sys

import pytest

from commstack.config import load_suite, load_system
from commstack.errors import ConfigError
from commstack.paths import TOP
from commstack.results.references import load_references, references_of
from commstack.spack.containers import images

SYSTEM = "name: x\nnodes: 1\nnode: {gpus: 0, nics: 1}\nlauncher: {}\n"
REF = "system: s\nreferences:\n- {id: r, benchmark: osu_bw, metric: bandwidth_MBps, points: {8: 1.0}}\n"
IMAGES = "registry: quay.io/x\nimages:\n  osu-mb: {tag: '{openmpi}', edfs: {osu-mb: {cxi: true}}}\n"
ALIAS_BOMB = "a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n"
LOADERS = {"system": lambda p: references_of(load_system(str(p))), "suite": load_suite, "references": load_references,
           "images": images}

CASES = [
    ("system", "name: x\nnodes: 1\nnode: {gpus: 0}\nlauncher: {}\n", "node.nics: required key is missing"),
    ("system", SYSTEM.replace("nodes: 1", "nodes: two"),
     "nodes: Input should be a valid integer, unable to parse string as an integer (got 'two')"),
    ("system", SYSTEM.replace("launcher: {}", "launcher: {mpi: pmi9}"),
     "launcher.mpi: Input should be 'pmix', 'pmi2', 'cray_shasta' or 'none' (got 'pmi9')"),
    ("system", SYSTEM + "nodes_typo: 2\n", "nodes_typo: unknown key"),
    ("system", "name: x\nnodes: 1\nnode: {gpus: -1, nics: 1, nic_line_rate_MBps: 0}\nlauncher: {}\n",
     "2 problems:\n  node.gpus: Input should be greater than or equal to 0 (got -1)\n"
     "  node.nic_line_rate_MBps: Input should be greater than 0 (got 0)"),
    ("system", SYSTEM + "variables: [A=1]\n", "variables: Input should be a valid dictionary"),
    ("system", SYSTEM + "nodes: 2\n", "line 5: key 'nodes' is given twice"),
    ("system", SYSTEM + "references: nowhere.yaml\n", "references /"),
    ("suite", "name: x\nsteps:\n- {benchmark: osu_bw, ranks: 2}\n", "steps.0.ranks: unknown key"),
    ("suite", "name: x\nsteps:\n- {benchmark: osu_bw, args: -i 50}\n",
     "steps.0.args: Value error, args is a list of arguments, e.g. ['-i', '50'], not one string"),
    ("suite", "name: x\nsteps:\n- {benchmark: osu_bw, nodes: two}\n", "steps.0.nodes"),
    ("suite", "name: x\nsteps:\n- {benchmark: osu_bw, ranks_per_node: two}\n",
     "1 problem:\n  steps.0.ranks_per_node: Input should be a valid integer, unable to parse string as an "
     "integer; or Input should be 'nic', 'core' or 'gpu' (got 'two')"),
    ("suite", "name: x\nsteps:\n- {benchmark: osu_bandwidth}\n", "steps.0.benchmark: Value error, unknown benchmark"),
    ("suite", "name: x\nsteps:\n- {nodes: 2}\n", "steps.0.benchmark: required key is missing"),
    ("suite", "name: x\nsteps: []\n", "steps: List should have at least 1 item"),
    ("suite", "steps:\n- {benchmark: osu_bw, repeats: 0}\n", "name: required key is missing\n  steps.0.repeats"),
    ("suite", "name: x\nsteps:\n- {benchmark: osu_bw, sizes: [8, 1Q]}\n", "steps.0.sizes.1"),
    ("suite", "name: x\nsteps:\n- {benchmark: osu_bw, sizes: [1048576, 8]}\n", "the smallest comes first"),
    ("suite", "name: x\nsteps:\n- {benchmark: osu_bw, sizes: [8, 1M]}\n", "OSU reads -m with atoll"),
    ("suite", "name: x\nsteps:\n- {benchmark: osu_bw, sizes: [8, 1M, 2M]}\n", "sizes is [smallest, largest]"),
    ("suite", "name: x\nsteps:\n- {benchmark: osu_bw, mode: cpu}\n", "mode is mpi-pingpong's"),
    ("suite", "name: x\nsteps:\n- {benchmark: osu_bw, environments: [dockerish]}\n",
     "steps.0.environments: Value error, unknown environment 'dockerish': native, or an EDF"),
    ("suite", "name: x\nname: y\nsteps:\n- {benchmark: osu_bw}\n", "line 2: key 'name' is given twice"),
    ("references", REF + "extra: 1\n", "extra: unknown key"),
    ("references", REF.replace("osu_bw", "osu_bandwidth"), "references.0.benchmark: Value error, unknown benchmark"),
    ("references", REF.replace("metric: bandwidth_MBps", "metric: speed"), "unknown metric 'speed'"),
    ("references", REF.replace("points: {8: 1.0}", "points: {8: fast}"), "references.0.points.8"),
    ("references", "system: s\n", "references: required key is missing"),
    ("references", REF + "diagnoses:\n- {benchmark: osu_bw, metric: bandwidth_MBps, size: 8, within: 0.5, message: m}\n",
     "diagnoses.0: Value error, give exactly one of `recorded` and `value`"),
    ("images", IMAGES + "extra: 1\n", "extra: unknown key"),
    ("images", IMAGES.replace("cxi: true", "cxi: yes-please"), "images.osu-mb.edfs.osu-mb.cxi"),
    ("images", IMAGES.replace("tag: '{openmpi}', ", ""), "images.osu-mb.tag: required key is missing"),
    ("images", IMAGES.replace("quay.io/x", "[a, b]"), "registry: Input should be a valid string"),
]
CASES += [(kind, ALIAS_BOMB, "YAML aliases (*a) are not allowed") for kind in LOADERS]
CASES += [(kind, "name: [x\n", "not valid YAML") for kind in LOADERS]


@pytest.mark.parametrize("kind,body,problem", CASES)
def test_a_bad_file_is_one_error_with_file_and_key_path(tmp_path, kind, body, problem):
    path = tmp_path / f"{kind}.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as e:
        LOADERS[kind](path)
    assert str(e.value).startswith(str(path)) and problem in str(e.value), str(e.value)


def test_the_files_in_the_repository_load():
    assert {"osu-mb", "nccl-tests"} <= set(images())
    assert load_system("alps-gh200").references.is_file()


@pytest.mark.parametrize("file", ["system", "references"])
def test_the_command_refuses_a_bad_file_before_launching_anything(tmp_path, file):
    """`commstack suite` with a bad system or references file: one error, exit 2, no traceback,
    no results directory."""
    (tmp_path / "references").mkdir()
    system = (TOP / "systems" / "local.yaml").read_text() + "references: references/local.yaml\n"
    refs = REF.replace("system: s", "system: local")
    if file == "system":
        system += "nodes: 3\n"
    else:
        refs += "extra: 1\n"
    (tmp_path / "sys.yaml").write_text(system)
    (tmp_path / "references" / "local.yaml").write_text(refs)
    proc = subprocess.run([sys.executable, "-m", "commstack", "suite", "smoke", "--system", str(tmp_path / "sys.yaml"),
                           "--results", str(tmp_path / "results"), "--slurm", "off"],
                          capture_output=True, text=True, timeout=120)
    problem = "key 'nodes' is given twice" if file == "system" else "local.yaml: 1 problem:\n  extra: unknown key"
    assert proc.returncode == 2 and problem in proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_a_systems_install_env_is_resolved_against_its_file(tmp_path):
    (tmp_path / "sys.yaml").write_text(SYSTEM + "install: {env: ../envs/x86}\n")
    assert load_system(str(tmp_path / "sys.yaml")).install.env == (tmp_path.parent / "envs" / "x86").resolve()


@pytest.mark.parametrize("install, where", [
    ("install: {path: x}\n", "install.path: unknown key"), ("install: {}\n", "install.env: required key is missing")])
def test_a_bad_install_is_named(tmp_path, install, where):
    (tmp_path / "sys.yaml").write_text(SYSTEM + install)
    with pytest.raises(ConfigError, match=where.replace(".", r"\.")):
        load_system(str(tmp_path / "sys.yaml"))
