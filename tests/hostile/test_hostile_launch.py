"""Issue 32, the launch half without Slurm: what a suite or system file, or an option, could make of a job
script, a command line or a run, through the command a user types (`bin/commstack suite ...`). Job scripts
are rendered with `--submit --dry-run`, command lines with `--dry-run`, runs use `--launcher mpirun`;
tests/faults/test_hostile_launch_slurm.py takes the rest through a real Slurm. Each test names its item."""

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from commstack.paths import TOP
from commstack.results.records import Record

pytestmark = pytest.mark.hostile

SYSTEM = """name: batchy
partition: debug
nodes: 1
node: {cores: 2, gpus: 0, nics: 1}
launcher: {mpi: pmix}
"""
ONE_STEP = "name: s\nsteps:\n- {id: pp, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 64]}\n"


def commstack(*args: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(TOP / "bin" / "commstack"), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)


def files(tmp_path: Path, suite: str = ONE_STEP, system: str = SYSTEM) -> tuple[str, str]:
    (tmp_path / "suite.yaml").write_text(suite)
    (tmp_path / "system.yaml").write_text(system)
    return str(tmp_path / "suite.yaml"), str(tmp_path / "system.yaml")


# ------------------------------------------------------------------------------------- 6: #SBATCH values

@pytest.mark.parametrize("key, yaml_value", [
    ("partition", "partition: 'local --output=/victim/pwned-%j.txt'"),
    ("batch.account", "batch: {account: 'acct --output=/victim/pwned-%j.txt'}"),
    ("batch.qos", "batch: {qos: '--output=/victim/pwned-%j.txt'}"),
    ("batch.reservation", "batch: {reservation: 'r --chdir=/victim'}"),
    ("batch.sbatch_flags.0", "batch: {sbatch_flags: ['--comment=x --output=/victim/pwned-%j.txt']}"),
    ("batch.sbatch_flags.0", "batch: {sbatch_flags: ['--output=/victim/pwned-%j.txt']}"),
    ("batch.sbatch_flags.0", "batch: {sbatch_flags: [debug]}"),
    ("launcher.salloc_flags.0", "launcher: {mpi: pmix, salloc_flags: ['-o/victim/pwned-%j.txt']}"),
])
def test_an_sbatch_value_that_would_be_more_options_is_refused(tmp_path, key, yaml_value):
    """issue 32 item 6: `partition: "local --output=/victim/pwned-%j.txt"` became `#SBATCH --partition=local
    --output=...`, two options to sbatch: root wrote /victim/pwned-1.txt. A value is one word not starting with
    '-'; a flags list holds one option a line, none that the script sets or that names a file. Exit 2, the key
    named, no script."""
    if key.startswith("launcher"):
        system = SYSTEM.replace("launcher: {mpi: pmix}\n", yaml_value + "\n")
    elif key == "partition":
        system = SYSTEM.replace("partition: debug", yaml_value)
    else:
        system = SYSTEM + yaml_value + "\n"
    suite, system = files(tmp_path, system=system)
    proc = commstack("suite", suite, "--system", system, "--submit", "--dry-run", "--pingpong", "/bin/true")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert f"  {key}: Value error, " in proc.stderr, proc.stderr
    assert "#!/bin/bash" not in proc.stdout


def test_sbatch_values_of_one_word_and_options_of_a_list_make_their_lines(tmp_path):
    """issue 32 item 6, the other side: one-word values and one option per list entry are their #SBATCH lines."""
    suite, system = files(tmp_path, system=SYSTEM + "batch: {account: a-1, qos: high, sbatch_flags: [--exclusive, "
                                                    "--mem=0, -Cgpu]}\n")
    proc = commstack("suite", suite, "--system", system, "--submit", "--dry-run", "--pingpong", "/bin/true")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("#SBATCH")]
    for want in ("--partition=debug", "--account=a-1", "--qos=high", "--exclusive", "--mem=0", "-Cgpu"):
        assert f"#SBATCH {want}" in lines


# --------------------------------------------------------------------------------- 8: two steps, one id

@pytest.mark.parametrize("steps", [
    "- {id: x, benchmark: osu_bw}\n- {id: x, benchmark: osu_latency}\n",
    "- {benchmark: osu_bw}\n- {benchmark: osu_bw, sizes: [1, 8]}\n",
    "- {benchmark: osu_bw}\n- {id: osu_bw, benchmark: osu_latency}\n",
])
def test_two_steps_with_the_same_name_are_refused_at_load(tmp_path, steps):
    """issue 32 item 8: two steps named alike (their id, else their benchmark) wrote one record, the second
    over the first; the terminal showed "[step 4/3]". Refused at load, exit 2, naming both steps."""
    suite, system = files(tmp_path, suite="name: dup\nsteps:\n" + steps)
    proc = commstack("suite", suite, "--system", system, "--dry-run")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert "Value error, steps 0 and 1 are both named " in proc.stderr and "give it an `id`" in proc.stderr


def test_a_gpu_mode_on_host_and_device_memory_is_one_step(tmp_path):
    """issue 32 item 8: a GPU mode makes host memory device memory; [host, device] x staged is one step, not
    two with one name."""
    suite, system = files(tmp_path, suite="name: m\nsteps:\n- {benchmark: mpi-pingpong, memory: [host, device], "
                                          "mode: [cpu, staged], ranks_per_node: 2}\n",
                          system=SYSTEM.replace("gpus: 0", "gpus: 1"))
    proc = commstack("suite", suite, "--system", system, "--dry-run", "--pingpong", "/bin/true")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "# suite m on batchy: 3 steps, 0 not runnable here", proc.stdout


# --------------------------------------------------------------------------------------- 10: 20,000 steps

def test_a_suite_of_20000_steps_is_refused_with_the_limit(tmp_path):
    """issue 32 item 10: 20,000 steps wrote a plan.json (17.2 MB) over the read limit, so `report` failed
    for that run for good. A suite may expand to at most 5000 steps (docs/harness.md): refused at load."""
    steps = "".join(f"- {{id: s{i}, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2}}\n" for i in range(20000))
    suite, system = files(tmp_path, suite="name: big\nsteps:\n" + steps)
    proc = commstack("suite", suite, "--system", system, "--launcher", "mpirun", "--no-build", "--results",
                     str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert "  (top level): Value error, the steps expand to up to 20000 steps; a suite may have at most 5000" \
        in proc.stderr, proc.stderr
    assert not (tmp_path / "r").exists()
    # what one entry expands to counts: 2 memories x 3 node counts x 1000 entries
    steps = "".join(f"- {{id: s{i}, benchmark: osu_bw, memory: [host, device], node_counts: [1, 2, 3]}}\n"
                    for i in range(1000))
    suite, system = files(tmp_path, suite="name: big\nsteps:\n" + steps)
    proc = commstack("suite", suite, "--system", system, "--dry-run")
    assert proc.returncode == 2 and "expand to up to 6000 steps" in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------- 12: format strings

def test_fi_pingpong_args_are_text_never_a_format_string(tmp_path):
    """issue 32 item 12: fi_pingpong's args went through str.format: `{` was a ValueError, `{host.__class__}`
    attribute access, `{port:>50000000}` E2BIG, and the reason shown "last stderr line: '-----'". Only
    {program}, {port} and {host} are filled in; every other brace reaches the tool as written."""
    if not shutil.which("fi_pingpong"):
        pytest.skip("no fi_pingpong (Debian: libfabric-bin)")
    odd = ["{", "{host.__class__.__mro__}", "{port:>50000000}"]
    args = json.dumps(["-I", "5", "-d", *odd])
    suite, system = files(tmp_path, suite=f"name: fmt\nsteps:\n- {{id: fi, benchmark: fi_pingpong, ranks_per_node: 2, "
                                          f"args: {args}, timeout_s: 60}}\n",
                          system=SYSTEM.replace("launcher: {mpi: pmix}", "launcher: {mpi: pmix, mpirun_flags: "
                                                "[--oversubscribe]}\nfabric: {provider: tcp}"))
    results = tmp_path / "r"
    proc = commstack("suite", suite, "--system", system, "--launcher", "mpirun", "--no-build", "--results",
                     str(results))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    step = results / "steps" / "fmt--fi-N1-n2-host-native"
    record = Record.read(step / "record.json")
    stderr = (step / "repeat-0" / "stderr.txt").read_bytes().decode(errors="replace")
    assert "Traceback" not in stderr and "Argument list too long" not in stderr, stderr
    # the server got them as words: fi_pingpong took the first as a server address it could not resolve
    assert record.error_kind == "pair-failed" and "the server (fi_pingpong) exited with status" in record.reason
    assert "'-----'" not in record.reason, record.reason


# ---------------------------------------------------------------------------------- 13: dash prefixes

def test_a_prefix_that_starts_with_a_dash_is_a_path_never_an_srun_option(tmp_path):
    """issue 32 item 13: `--osu-prefix=--export=NONE,X=1` became `srun ... --export=NONE,X=1/libexec/...`,
    and the benchmark's own -i -x -m went to srun. Prefixes are absolute paths, and srun's options end with
    `--` before the program."""
    latency = tmp_path / "--export=NONE,X=1" / "libexec" / "osu-micro-benchmarks" / "mpi" / "pt2pt" / "osu_latency"
    latency.parent.mkdir(parents=True)  # what --dry-run asks of an OSU install
    latency.write_text("")
    (tmp_path / "-pp").symlink_to("/bin/true")
    proc = commstack("suite", "smoke", "--dry-run", "--osu-prefix=--export=NONE,X=1", "--pingpong=-pp", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    sruns = [shlex.split(line.split("   # x")[0]) for line in proc.stdout.splitlines() if line.startswith("srun ")]
    assert len(sruns) >= 5, proc.stdout
    for argv in sruns:
        program = argv[argv.index("--") + 1:]
        assert all(a.startswith("-") for a in argv[1:argv.index("--")]), argv  # srun's, up to --
        assert program[0].startswith("/") or program[0] == "env", argv
    osu = [a for argv in sruns for a in argv if "/libexec/osu-micro-benchmarks/" in a]
    assert osu and all(a.startswith(f"{tmp_path}/--export=NONE,X=1/libexec/") for a in osu), osu
    # after srun's `--` and the reaper's own (REAPER ends with `--`), the binary is a path
    assert any(argv[len(argv) - argv[::-1].index("--")] == f"{tmp_path}/-pp" for argv in sruns), sruns


# --------------------------------------------------------------------------------------- 14: upper bounds

@pytest.mark.parametrize("field, value, limit", [("ranks_per_node", "100000", "1024"),
                                                 ("repeats", "100000000", "1000"),
                                                 ("timeout_s", "100000000000000000000", "86400")])
def test_a_step_beyond_the_bounds_is_refused(tmp_path, field, value, limit):
    """issue 32 item 14: ranks_per_node 100000 on 2 cores, repeats 10^8, timeout_s 1e20 (srun
    -t1666666666666666667) were taken. Each has an upper bound (docs/harness.md): exit 2 naming it."""
    suite, system = files(tmp_path, suite=f"name: b\nsteps:\n- {{benchmark: mpi-pingpong, {field}: {value}}}\n")
    proc = commstack("suite", suite, "--system", system, "--dry-run")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert f"  steps.0.{field}: Input should be less than or equal to {limit}" in proc.stderr, proc.stderr
