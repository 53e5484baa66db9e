"""The requirement sets of requirements/: one pin per package, each use installing what it needs.

- every line of requirements/*.txt is a comment, an include of another set, or one exact pin; each
  package is pinned once over all the files, and dev.txt (what bin/commstack installs by default)
  reaches every pin through its includes;
- the venv the tests run in was made by bin/commstack from dev.txt as it is now, and holds each pin;
- spack.txt gives commstack's Spack commands every module they import (asked of the command line,
  in a new interpreter), and none of the harness's, the tests', the linters' or the docs' packages;
  so do commstack --help, a mistyped command and a Spack command's mistyped option, named errors;
- the generated Containerfiles install spack.txt alone, and set it (ENV) before any bin/commstack runs;
- a harness command in a venv of spack.txt is a named error that says how to install the rest;
- `commstack screen` imports no pytest: the command line, not the pytest plugin, handles its signals.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from commstack.paths import TOP
from commstack.spack import containers

SETS = TOP / "requirements"
DEFAULT = "requirements/dev.txt"
#: what the images need no part of: the tests', the plots', the docs', the linters' and the CUDA wheels
NOT_IN_IMAGES = {"pytest", "hypothesis", "coverage", "matplotlib", "rich", "mkdocs", "mkdocs-material",
                 "check-jsonschema", "black", "isort", "flake8", "nvidia-cuda-runtime-cu12",
                 "nvidia-cuda-nvcc-cu12"}
#: the commands of commstack.cli.envs: what an image's or a login node's venv runs
SPACK_COMMANDS = ("setup", "lock", "preflight", "containerize", "images", "mirror")
#: a RUN step that runs bin/commstack (the manifests' echoed comments name it too)
LAUNCH = re.compile(r"(?:^|&&)\s*(?:\w+=\S+\s+)*/opt/commstack/bin/commstack\s")
LINE = re.compile(r"(?:-r (?P<include>\S+)|(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+))\s*(?:#.*)?")


def read(path: Path) -> tuple[list[Path], dict[str, str]]:
    """The files a set includes and the pins it writes itself; any other line fails, quoted."""
    includes, pins = [], {}
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = LINE.fullmatch(line)
        if not m:
            pytest.fail(f"{path.relative_to(TOP)}:{n}: neither a comment, `-r FILE` nor NAME==VERSION: {raw!r}")
        if m["include"]:
            includes.append(path.parent / m["include"])
        else:
            pins[canonicalize_name(m["name"])] = m["version"]
    return includes, pins


def closure(path: Path) -> dict[str, str]:
    """Every pin pip installs from `path`, its includes followed."""
    includes, pins = read(path)
    for inc in includes:
        pins.update(closure(inc))
    return pins


def test_each_package_is_pinned_once_and_dev_reaches_every_pin():
    files = sorted(SETS.glob("*.txt"))
    assert [f.name for f in files] == ["dev.txt", "harness.txt", "spack.txt"]
    owner: dict[str, str] = {}
    for f in files:
        for name in read(f)[1]:
            assert name not in owner, f"{name} is pinned in both {owner[name]} and {f.name}"
            owner[name] = f.name
    assert closure(SETS / "dev.txt").keys() == owner.keys()  # the default venv gets them all
    assert closure(SETS / "spack.txt").keys() < closure(SETS / "harness.txt").keys() < owner.keys()
    assert not (TOP / "requirements.txt").exists()  # no second list beside these


def test_the_venv_is_bin_commstacks_from_dev_txt_and_holds_every_pin():
    """The stamp bin/commstack writes names the set and hashes all sets and pyproject.toml, as it does."""
    text = (DEFAULT + "\n").encode() + b"".join(f.read_bytes() for f in sorted(SETS.glob("*.txt")))
    want = hashlib.sha256(text + (TOP / "pyproject.toml").read_bytes()).hexdigest()
    stamp = Path(sys.prefix) / ".commstack-install.sha256"
    assert stamp.read_text().strip() == want, f"{sys.prefix} is not bin/commstack's venv of {DEFAULT} as it is now"
    for name, version in closure(SETS / "dev.txt").items():
        assert metadata.version(name) == version, name


def needed(dists: set[str]) -> set[str]:
    """The distributions pip installs for `dists`: they and what they require, extras left out."""
    seen, todo = set(), list(dists)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for spec in metadata.requires(name) or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


#: command lines an image's venv must answer: each Spack command's --help, and the mistakes typed
#: there (commstack's --help, a mistyped command, a Spack command's mistyped option): exit status, stderr
LINES = [*[([cmd, "--help"], 0, "") for cmd in SPACK_COMMANDS],
         (["--help"], 0, ""),
         (["imagez"], 2, "commstack: error: argument cmd: invalid choice: 'imagez' (choose from 'run', 'test', "),
         (["images", "--bogus"], 2, "usage: commstack images [-h]\n"
                                    "commstack images: error: unrecognized arguments: --bogus\n"),
         (["lock", "--chek"], 2, "commstack lock: error: unrecognized arguments: --chek\n")]


@pytest.mark.parametrize(("argv", "status", "error"), LINES, ids=[" ".join(line[0]) for line in LINES])
def test_spack_txt_gives_the_spack_commands_what_they_import(argv, status, error):
    """`commstack ARGV` in a new interpreter: every module it loads from outside the standard library
    comes with spack.txt; the harness's, tests' and docs' packages are not loaded."""
    probe = ("import sys\nfrom commstack.cli.main import main\n"
             f"try:\n    main({argv!r})\nexcept SystemExit as e:\n    print(e.code)\n"
             "print(*sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    *_, code, last = out.stdout.splitlines()
    assert (code, error in out.stderr) == (str(status), True), out.stderr
    loaded = last.split()
    owners = metadata.packages_distributions()
    dists = {canonicalize_name(d) for m in loaded if m != "commstack" for d in owners.get(m, [])}
    image = needed(set(closure(SETS / "spack.txt")))
    assert dists and dists <= image, f"`commstack {' '.join(argv)}` loads {sorted(dists - image)}, not in spack.txt"
    assert not image & NOT_IN_IMAGES


def test_a_harness_command_in_a_venv_of_spack_txt_names_what_it_lacks():
    """`commstack report` where the harness's packages are not (an image's venv, as the images set
    COMMSTACK_REQUIREMENTS): a named error, not a traceback, and the command line that installs them."""
    probe = ("import sys\n"
             "sys.modules.update(dict.fromkeys(('pytest', '_pytest', 'rich', 'matplotlib')))  # none importable\n"
             "from commstack.cli.main import main\nsys.exit(main(['report', 'results/x']))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COMMSTACK_REQUIREMENTS": "requirements/spack.txt"})
    assert (out.returncode, out.stdout) == (2, ""), out.stderr
    assert out.stderr == (
        f"commstack report: error: this venv ({sys.prefix}) has no pytest: it holds a smaller requirement set than "
        "report needs (COMMSTACK_REQUIREMENTS=requirements/spack.txt; an image's is requirements/spack.txt, the "
        "Spack commands alone). `COMMSTACK_REQUIREMENTS=requirements/dev.txt bin/commstack report` installs every "
        "set (from PyPI, or PIP_INDEX_URL)\n")


@pytest.mark.parametrize("name", containers.images())
def test_the_images_install_spack_txt_alone(name):
    img = containers.image(name)
    steps = DockerfileParser(fileobj=io.BytesIO(img.containerfile.read_bytes())).structure
    runs = [s["value"] for s in steps if s["instruction"] == "RUN"]
    assert not any(re.search(r"\bpip\b|requirements", r) and "requirements/spack.txt" not in r for r in runs)
    launched = [i for i, s in enumerate(steps) if s["instruction"] == "RUN" and LAUNCH.search(s["value"])]
    # the set, for the image and those above: no RUN line, nor a later bin/commstack, asks for another
    env = [i for i, s in enumerate(steps) if s["instruction"] == "ENV" and "COMMSTACK_REQUIREMENTS" in s["value"]]
    assert not any("COMMSTACK_REQUIREMENTS" in r for r in runs)
    if name == "comm-fwk":  # the chain's root sets Spack up, the images above inherit its venv and ENV
        assert [steps[i]["value"] for i in env] == ["COMMSTACK_REQUIREMENTS=requirements/spack.txt"]
        assert [steps[i]["value"].split("&&")[0].strip() for i in launched] == ["/opt/commstack/bin/commstack setup"]
        assert env[0] < launched[0]
        copies = [s["value"] for s in steps if s["instruction"] == "COPY"]
        assert "requirements /opt/commstack/requirements" in copies
    else:
        assert launched == env == []


def test_a_missing_requirement_set_is_named_before_any_venv_is_made(tmp_path):
    venv = tmp_path / "venv"
    out = subprocess.run([str(TOP / "bin" / "commstack"), "images"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "COMMSTACK_REQUIREMENTS": "requirements/none.txt",
                              "COMMSTACK_VENV": str(venv)})
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == f"commstack: COMMSTACK_REQUIREMENTS=requirements/none.txt: no such file in {TOP}\n"
    assert not venv.exists()


@pytest.mark.parametrize("argv", [["screen", "--help"], ["screen", "--plan", "--nodes", "8", "--system", "local"]])
def test_screen_imports_no_pytest(argv):
    """bin/commstack screen as typed, every import of its interpreter shown (-X importtime): pytest is not
    one, nor any part of it (it once came with the plugin's Ctrl-C handling)."""
    out = subprocess.run([str(TOP / "bin" / "commstack"), *argv], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert out.returncode == 0 and "screen" in out.stdout, out.stdout + out.stderr
    imported = {line.rpartition("|")[2].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "commstack.screen.run" in imported  # what cli.screen imports (importlib.import_module shows no line)
    assert not {m for m in imported if m.split(".")[0] in ("pytest", "_pytest")}, sorted(imported)
