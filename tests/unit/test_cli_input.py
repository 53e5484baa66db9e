"""The command line before anything runs: abbreviated flags are mistyped flags, the commands' table is
the commands the modules register, a results directory is
never reused, run ids are finer than a second, and bin/commstack checks the arguments before it installs
Debian packages."""

import importlib
import inspect
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

from commstack import cli
from commstack.cli.main import COMMANDS
from commstack.paths import TOP
from commstack.run.runner import new_run_dir


def commstack(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "commstack", *args], capture_output=True, text=True, timeout=120)


def test_run_ids_are_finer_than_a_second(tmp_path):
    runs = [new_run_dir(tmp_path) for _ in range(3)]
    assert all(re.fullmatch(r"\d{8}-\d{6}-\d{6}-[0-9a-f]{6}", r.name) for r in runs), runs
    assert len({r.name[:22] for r in runs}) == 3  # the microseconds alone tell them apart, in order
    assert sorted(runs) == runs and (tmp_path / "latest").resolve() == runs[-1]


def test_a_results_directory_that_holds_files_is_refused(tmp_path):
    (tmp_path / "record.json").write_text("an earlier run\n")
    proc = commstack("run", "--results", str(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (f"commstack run: error: --results {tmp_path} exists and is not empty; give a new or empty directory"
            in proc.stderr)
    assert "[step" not in proc.stdout and os.listdir(tmp_path) == ["record.json"]
    plain = subprocess.run([sys.executable, "-m", "pytest", "suites/smoke.yaml", "--results", str(tmp_path),
                            "-p", "no:cacheprovider"], cwd=TOP, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 4 and f"--results {tmp_path} exists and is not empty" in plain.stderr


def test_an_abbreviated_flag_is_a_mistyped_flag():
    for argv, unknown in ((["run", "--sys", "x"], "--sys x"),
                          (["suite", "smoke", "--dry", "--system", "local"], "--dry")):
        proc = commstack(*argv)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.endswith(f"\ncommstack {argv[0]}: error: unrecognized arguments: {unknown}\n")
        assert proc.stderr.startswith(f"usage: commstack {argv[0]} [-h]")  # the command's usage, not commstack's


def test_the_commands_table_is_what_the_modules_register():
    """COMMANDS (name, module, help line) names exactly the commands whose options commstack.cli's
    modules add, each with its add_ and cmd_ in its module; --help lists them with their lines."""
    modules = [importlib.import_module(f"commstack.cli.{m.name}") for m in pkgutil.iter_modules(cli.__path__)]
    added = {name.removeprefix("add_") for mod in modules for name, f in vars(mod).items()
             if name.startswith("add_") and inspect.isfunction(f) and f.__module__ == mod.__name__}
    assert added == set(COMMANDS)
    for name, (module, _) in COMMANDS.items():
        mod = importlib.import_module(f"commstack.cli.{module}")
        assert callable(getattr(mod, f"add_{name}")) and callable(getattr(mod, f"cmd_{name}")), name
    top = subprocess.run([sys.executable, "-m", "commstack", "--help"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COLUMNS": "400"})  # one line per command
    assert top.returncode == 0, top.stderr
    listed = re.findall(r"^    (\w+) +(\S.*)$", top.stdout, re.M)
    assert listed == [(name, c.help) for name, c in COMMANDS.items()]


def test_bin_commstack_checks_the_arguments_before_it_installs_packages(tmp_path):
    """On a PATH without dpkg-query and apt-get, installing would fail saying so: a mistyped flag is
    refused first; a right command line goes on to the installation."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "cat", "cut", "dirname", "grep", "readlink", "sha256sum"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    env = {**os.environ, "PATH": str(bin_dir)}
    mistyped = subprocess.run([str(TOP / "bin" / "commstack"), "run", "--sys", "x"], env=env, capture_output=True,
                              text=True, timeout=120)
    assert mistyped.returncode == 2, mistyped.stdout + mistyped.stderr
    assert "unrecognized arguments: --sys x" in mistyped.stderr and "missing packages" not in mistyped.stderr
    right = subprocess.run([str(TOP / "bin" / "commstack"), "run", "--results", str(tmp_path / "r")], env=env,
                           capture_output=True, text=True, timeout=120)
    assert right.returncode == 2, right.stdout + right.stderr
    assert "commstack: missing packages slurm-wlm" in right.stderr and "no apt-get here" in right.stderr
    assert "commstack run: error: the Debian packages commstack needs could not be installed" in right.stderr
    assert not Path(tmp_path / "r").exists()


def test_the_default_test_command_runs_the_workstation_tiers_and_all_of_them_on_demand(tmp_path):
    """`bin/commstack test` (issue 36 item 3): unit, hostile, slurm and faults, and one line naming how to add the
    spack and multinode tiers; `--all` collects those too (what .ci/run runs); -m with --all is refused."""
    def collected(*args: str) -> tuple[str, set[str]]:
        proc = commstack("test", *args, "--", "--collect-only", "-q", "-p", "no:cacheprovider",
                         f"--junitxml={tmp_path / 'junit.xml'}")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout, {line.split("/")[1] for line in proc.stdout.splitlines() if line.startswith("tests/")}
    out, tiers = collected()
    assert out.startswith("commstack test: tiers unit, hostile, slurm and faults; the spack and multinode tiers "
                          "too: bin/commstack test --all (or -m spack, -m multinode)\n")
    assert tiers == {"unit", "hostile", "slurm", "faults"}
    assert "test_multinode.py" not in out and "test_batch.py" not in out
    out, tiers = collected("--all")
    assert tiers == {"unit", "hostile", "slurm", "faults", "spack"} and "test_multinode.py" in out
    assert "bin/commstack test --all" in (TOP / ".ci" / "run").read_text()
    both = commstack("test", "--all", "-m", "slurm")
    assert both.returncode == 2 and "-m and --all: give one" in both.stderr
