"""Issue 22, the input half: files and paths a hostile or unlucky user gives commstack, through the command
they type (bin/commstack suite/export/history/compare/report/parse). Nothing here needs Slurm: job
scripts are rendered with `--submit --dry-run` and run with a stub srun, runs use `--launcher mpirun`;
tests/faults/test_hostile_inputs.py takes the same inputs through a real Slurm. Each test names the
defect it guards."""

import json
import os
import pwd
import re
import shutil
import sqlite3
import stat
import subprocess
from pathlib import Path

import markdown
import pytest
from checkouts import UNSET, without_osu

from commstack import exits
from commstack.files import UnsafePathError, own_dir
from commstack.paths import TOP
from commstack.results.records import Record
from commstack.tools.osu import parse_osu

pytestmark = pytest.mark.hostile

SEED = TOP / "systems" / "references" / "seeds" / "cscs-osu-01.txt"
#: what a terminal must never get raw: an OSC title sequence, a colour and line-clear, a bidi override
ESCAPES = ("\x1b]0;PWNED\x07", "\x1b[31m\x1b[2K", "\u202e")
PAYLOAD = "$(touch {m}) `touch {m}`; touch {m} && touch {m} | touch {m} '\"\\"


def commstack(*args: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """bin/commstack as a user types it (not `run`/`test`: those may install Debian packages first); a variable
    None in `env` is unset."""
    return subprocess.run([str(TOP / "bin" / "commstack"), *args], capture_output=True, text=True, timeout=timeout,
                          env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None})


def raw_controls(text: str) -> list[str]:
    return [c for c in text if c in "\x1b\x07\u202e\x00"]


def a_run(root: Path, name: str = "run", **update) -> Path:
    """A run of one passing osu_bw step (or as `update` makes it), from a recorded real output."""
    sweep = parse_osu(SEED.read_text())[0]
    d = root / name
    fields = dict(run_id=name, index=0, suite="s", system="alps-gh200", step="osu_bw", benchmark=sweep.benchmark,
                  tool="osu", tags={"nodes": 2, "ntasks": 2}, metric="bandwidth_MBps", unit="MB/s", verdict="pass",
                  repeats=[sweep.rows], started=1000.0)
    Record(**{**fields, **update}).write(d)
    return d


def record_json(run: Path) -> Path:
    return run / "steps" / "s--osu_bw" / "record.json"


def mount_tmpfs(d: Path, options: str) -> Path:
    """A tmpfs mounted at the new directory `d` with `options` (root only: skipped where it cannot be)."""
    d.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(d)], capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs ({options}) here: {mount.stderr.strip()}")
    return d


# ------------------------------------------------------------------------------------ 1: job scripts

HOSTILE_SUITE = """name: "evil\\ntouch /tmp/pwned-name; echo"
steps:
- {id: "x\\ntouch /tmp/pwned-id\\n", benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 64]}
"""
HOSTILE_SYSTEM = """name: hostile
partition: "debug\\ntouch /tmp/pwned-partition"
nodes: 1
node: {cores: 2, gpus: 0, nics: 1}
launcher: {mpi: pmix, salloc_flags: ["--overcommit\\ntouch /tmp/pwned-salloc"]}
batch: {account: "acct\\ntouch /tmp/pwned-account"}
variables: {"X=1; touch /tmp/pwned-var; Y": "v"}
"""


def test_a_job_script_from_files_with_newlines_is_refused_naming_each_key(tmp_path):
    """issue 22 item 1: a newline in a suite name, step id, partition, account, salloc flag or a variable
    name became a line of its own in job.sh, run as root. `suite --submit --dry-run` refuses them, exit 2,
    naming every key, and prints no script."""
    suite, system = tmp_path / "evil.yaml", tmp_path / "hostile.yaml"
    suite.write_text(HOSTILE_SUITE)
    system.write_text(HOSTILE_SYSTEM)
    proc = commstack("suite", str(suite), "--system", str(system), "--submit", "--dry-run", "--pingpong", "/bin/true")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    for key in ("partition: Value error, control or format character '\\n'", "launcher.salloc_flags.0:",
                "batch.account:", "variables.X=1; touch /tmp/pwned-var; Y.[key]: Value error, variable name",
                "is not a shell name ([A-Za-z_][A-Za-z0-9_]*)"):
        assert key in proc.stderr, proc.stderr
    system.write_text(HOSTILE_SYSTEM.split("partition")[0] + "nodes: 1\nnode: {cores: 2, gpus: 0, nics: 1}\n"
                      "launcher: {mpi: pmix}\n")
    proc = commstack("suite", str(suite), "--system", str(system), "--submit", "--dry-run", "--pingpong", "/bin/true")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert "  name: Value error, a name is 1 to 64 letters, digits" in proc.stderr
    assert "  steps.0.id: Value error, a name is 1 to 64 letters" in proc.stderr


def test_a_job_script_with_shell_metacharacters_runs_none_of_them(tmp_path):
    """issue 22 item 1: values that pass the schema (variables, srun flags, step arguments, account and
    partition holding `;`, `$(...)`, backticks and quotes) are quoted: the script passes `bash -n`, and run
    with a stub srun it hands them over as literal words and runs none of them."""
    marker = tmp_path / "pwned"
    payload = PAYLOAD.format(m=marker)
    # an #SBATCH value is one word (issue 32 item 6): the same metacharacters, without blanks and quotes
    word = payload.split("'")[0].strip().replace(" ", "${IFS}")
    results = tmp_path / "results"

    def job_script(value: str, word: str) -> str:
        suite, system = tmp_path / "meta.yaml", tmp_path / "meta-system.yaml"
        suite.write_text("name: meta.suite_1\nsteps:\n- {id: a.b_c-1, benchmark: mpi-pingpong, mode: cpu, "
                         f"ranks_per_node: 2, sizes: [8, 64], args: [-n, 1, {json.dumps(value)}]}}\n")
        system.write_text(f"""name: meta
partition: {json.dumps("debug;" + word)}
nodes: 1
node: {{cores: 2, gpus: 0, nics: 1}}
launcher: {{mpi: pmix, srun_flags: [{json.dumps("--comment=" + value)}], salloc_flags: [--overcommit]}}
batch: {{account: {json.dumps("acct;" + word)}, sbatch_flags: [{json.dumps("--comment=" + word)}]}}
variables: {{X_1: {json.dumps(value)}, _Y: "$X_1"}}
""")
        proc = commstack("suite", str(suite), "--system", str(system), "--submit", "--dry-run", "--pingpong",
                         "/bin/true", "--results", str(results))
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    script = job_script(payload, word)
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    # against the same files holding a plain word: no line more, and a line that differs is the same command
    plain = job_script("plain", "plain").splitlines()
    lines = script.splitlines()
    assert len(lines) == len(plain)
    for line, twin in zip(lines, plain):
        if line != twin:
            assert line.split()[0] == twin.split()[0] and twin.split()[0] in ("#SBATCH", "run_step"), line
    # the #SBATCH block is the head of the script; bash reads those lines as comments
    head = [line for line in lines[1:] if line.startswith("#SBATCH")]
    assert lines[1:1 + len(head)] == head and not any(line.startswith("#SBATCH") for line in lines[1 + len(head):])
    assert f"#SBATCH --account=acct;{word}" in head and f"#SBATCH --comment={word}" in head
    # run it: srun is a stub that records its arguments and the variables it was given
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    log = tmp_path / "srun.log"
    (stubs / "srun").write_text(f"#!/usr/bin/env python3\nimport json, os, sys\nwith open({str(log)!r}, 'a') as f:\n"
                                "    f.write(json.dumps([sys.argv[1:], os.environ.get('X_1'), os.environ.get('_Y')]) "
                                "+ '\\n')\n")
    (stubs / "srun").chmod(0o755)
    job = tmp_path / "job.sh"
    job.write_text(script)
    ran = subprocess.run(["bash", str(job)], env={**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"},
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert not marker.exists(), "an input ran as a command"
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 2  # the probe and the one repeat
    argv, x, y = calls[1]
    assert "--comment=" + payload in argv and argv[-3:] == ["-n", "1", payload]
    # set by `env` for the benchmark alone, as it was written, not expanded; srun itself has neither (issue 32 item 5)
    assert argv.index("--") < argv.index("env")
    assert argv[argv.index("env"):argv.index("env") + 3] == ["env", f"X_1={payload}", "_Y=$X_1"]
    assert (x, y) == (None, None)
    assert (results / "steps" / "meta.suite_1--a.b_c-1-cpu-N1-n2-host-native" / "repeat-0" / "exit").is_file()


def test_a_path_with_a_newline_never_reaches_a_job_script(tmp_path):
    """issue 22 item 1: an --osu-prefix or --results holding a newline would end a comment or an #SBATCH
    line of job.sh; the comment shows it escaped, the results path is refused."""
    proc = commstack("suite", "smoke", "--submit", "--dry-run", "--pingpong", "/bin/true", "--osu-prefix",
                     f"/x\ntouch {tmp_path}/pwned")
    assert proc.returncode == 0, proc.stderr
    assert f"# not in this job: smoke--osu_latency-N1-n2-host-native: /x\\x0atouch {tmp_path}/pwned is not" \
        in proc.stdout
    assert not [line for line in proc.stdout.splitlines() if line.startswith("touch")]
    proc = commstack("suite", "smoke", "--submit", "--dry-run", "--pingpong", "/bin/true", "--results",
                     f"{tmp_path}/r\ntouch {tmp_path}/pwned")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "a control character in a path the job script names" in proc.stderr


# --------------------------------------------------------------------------------- 2: safe file names

@pytest.mark.parametrize("where, value", [("id", "../../../../../../../tmp/escaped"), ("id", "a/b"), ("id", ".."),
                                          ("id", ".hidden"), ("id", "x" * 65), ("name", "a/b"), ("name", "../up"),
                                          ("name", "-rf")])
def test_suite_names_and_step_ids_that_would_leave_the_run_directory_are_refused(tmp_path, where, value):
    """issue 22 item 2: a step id `../../../tmp/escaped` made root write outside the results; a suite name
    with `/` nested directories and lost its records. Both are refused with the rule, exit 2."""
    name, step_id = (value, "ok") if where == "name" else ("ok", value)
    suite = tmp_path / "s.yaml"
    suite.write_text(f"name: {json.dumps(name)}\nsteps:\n- {{id: {json.dumps(step_id)}, benchmark: mpi-pingpong, "
                     "mode: cpu, ranks_per_node: 2, sizes: [8, 64]}\n")
    proc = commstack("suite", str(suite), "--launcher", "mpirun", "--no-build", "--results", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    key = "name" if where == "name" else "steps.0.id"
    assert (f"  {key}: Value error, a name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or "
            "digit, without '..' (it names files and directories)") in proc.stderr
    assert not (tmp_path / "r").exists() and not Path("/tmp/escaped-cpu-N1-n2-host-native").exists()


def test_a_record_names_no_path_outside_the_run(tmp_path):
    """issue 22 item 2: the record schema holds the same rule, so a record read back (history import,
    status of a batch run) cannot name a directory outside its run."""
    run = a_run(tmp_path)
    data = json.loads(record_json(run).read_text())
    data["step"] = "../../escaped"
    record_json(run).write_text(json.dumps(data))
    proc = commstack("report", str(run))
    assert proc.returncode == 2
    assert f"{record_json(run)}: not a commstack record (a name is 1 to 180 letters" in proc.stderr
    assert "at step); truncated, damaged or written by something else" in proc.stderr


# ------------------------------------------------------------------------------ 3: results directories

def test_a_results_directory_of_another_user_is_refused(tmp_path):
    """issue 22 item 3: --results in an empty directory owned by another user was accepted; that user
    could plant `steps -> /root/target` and have root write into it. Refused, exit 2, nothing written,
    and so is a directory below one of theirs, and one that group or others may write."""
    nobody = pwd.getpwnam("nobody").pw_uid
    if os.geteuid() == nobody:
        pytest.skip("runs as nobody: no other user to hand the directory to")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, nobody, -1)
    for results, message in (
            (theirs, f"results directory {theirs} belongs to uid {nobody}, not to you (uid {os.geteuid()})"),
            (theirs / "run", f"{theirs / 'run'}: its parent {theirs} belongs to uid {nobody}")):
        proc = commstack("suite", "smoke", "--launcher", "mpirun", "--no-build", "--results", str(results))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert message in proc.stderr and "[step" not in proc.stdout
        assert os.listdir(theirs) == []
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    proc = commstack("suite", "smoke", "--launcher", "mpirun", "--no-build", "--results", str(shared))
    assert proc.returncode == 2 and os.listdir(shared) == []
    assert f"results directory {shared} has mode 0777, writable by others; chmod go-w {shared}" in proc.stderr


def test_a_symlink_planted_in_the_results_is_not_followed(tmp_path):
    """issue 22 item 3: `steps -> /root/target` planted once the run began made root write every record
    into the target. Records and exports make their directories with O_NOFOLLOW: the planted link is
    refused by name and the target stays empty."""
    run = a_run(tmp_path)
    target = tmp_path / "target"
    target.mkdir()
    shutil.rmtree(run / "steps")
    (run / "steps").symlink_to(target)
    with pytest.raises(UnsafePathError, match=f"{run / 'steps'} is a symlink or not a directory"):
        a_run(tmp_path)
    (run / "export").symlink_to(target)
    (run / "steps").unlink()
    a_run(tmp_path)
    proc = commstack("export", str(run), "--format", "jsonl")
    assert proc.returncode == 2 and f"{run / 'export'} is a symlink or not a directory" in proc.stderr
    assert os.listdir(target) == []


def test_results_directories_are_not_world_readable(tmp_path):
    """issue 22 items 3 and 12: results/ was world-readable, with variables.json, record.json and the
    history in it. A new --results is made 0750 (less what the umask takes), results/ of the checkout loses
    what others could do, and a run's files stay inside."""
    no_osu = {**without_osu(tmp_path, dict(os.environ)), **dict.fromkeys(UNSET)}
    proc = commstack("suite", "smoke", "--launcher", "mpirun", "--no-build", "--results", str(tmp_path / "r"),
                     env=no_osu)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # a checkout with no OSU: the OSU steps are not-run
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "r").stat().st_mode) == 0o750 & ~umask
    root = tmp_path / "results"
    root.mkdir()
    root.chmod(0o755)
    assert own_dir(root, private=True) == root and stat.S_IMODE(root.stat().st_mode) == 0o750
    link = tmp_path / "link"
    link.symlink_to(root)
    with pytest.raises(UnsafePathError, match=f"results directory {link} is a symlink, not a directory"):
        own_dir(link)


# --------------------------------------------------------------------------------- 4: output targets

def targets(tmp_path: Path) -> dict[str, Path]:
    """Existing things that are not regular files: a character device (/dev/null's numbers, made here), a
    FIFO, a directory and a symlink to a precious file."""
    made = {"device": tmp_path / "null", "fifo": tmp_path / "fifo", "directory": tmp_path / "dir",
            "symlink": tmp_path / "link"}
    try:
        os.mknod(made["device"], 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        del made["device"]  # not root: the other kinds still run
    os.mkfifo(made["fifo"])
    made["directory"].mkdir()
    (tmp_path / "precious").write_text("precious\n")
    made["symlink"].symlink_to(tmp_path / "precious")
    return made


KIND = {"device": "a character device", "fifo": "a FIFO", "directory": "a directory", "symlink": "a symlink"}


@pytest.mark.parametrize("command", ["export", "history --plot"])
def test_outputs_that_are_not_regular_files_are_refused_and_left_alone(tmp_path, command):
    """issue 22 item 4: `export --output /dev/full` exited 0 and replaced the device node with a regular
    file. An output that exists and is not a regular file is refused, exit 2, and stays what it was."""
    run = a_run(tmp_path)
    db = tmp_path / "h.sqlite"
    assert commstack("history", "import", str(run), "--history", str(db)).returncode == 0
    for kind, target in targets(tmp_path).items():
        before = os.lstat(target)
        argv = (["export", str(run), "--format", "jsonl", "--output", str(target)] if command == "export"
                else ["history", "--history", str(db), "--plot", str(target)])
        proc = commstack(*argv, timeout=60)
        assert proc.returncode == 2, (kind, proc.stdout, proc.stderr)
        assert f"{target} exists and is {KIND[kind]}, not a regular file" in proc.stderr
        after = os.lstat(target)
        assert (stat.S_IFMT(after.st_mode), after.st_ino) == (stat.S_IFMT(before.st_mode), before.st_ino), kind
    assert (tmp_path / "precious").read_text() == "precious\n"


def test_a_dash_means_stdout(tmp_path):
    """issue 22 item 4: `--output -` wrote a file named `-`; it is stdout, for export and for the plot."""
    run = a_run(tmp_path)
    proc = subprocess.run([str(TOP / "bin" / "commstack"), "export", str(run), "--format", "jsonl", "--output", "-"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout.splitlines()[0])["step"] == "osu_bw"
    db = tmp_path / "h.sqlite"
    assert commstack("history", "import", str(run), "--history", str(db)).returncode == 0
    png = subprocess.run([str(TOP / "bin" / "commstack"), "history", "--history", str(db), "--plot", "-"],
                         capture_output=True, timeout=120, cwd=tmp_path)
    assert png.returncode == 0 and png.stdout.startswith(b"\x89PNG\r\n") and b"1 runs" in png.stderr
    assert not (tmp_path / "-").exists()


# ----------------------------------------------------------------------------- 5: what is shown

def test_escape_sequences_and_markup_in_a_record_are_shown_as_text(tmp_path):
    """issue 22 item 5: an OSC title, colour codes and U+202E went raw to the terminal and report.md, and
    report.md carried a raw <script>. The terminal gets visible escapes; report.md, rendered as Markdown,
    has no element the record made, and index.html keeps escaping."""
    reason = "".join(ESCAPES) + "<script>alert(1)</script> [x](javascript:alert(1)) a|b `c` ```"
    run = a_run(tmp_path, reason=reason, verdict="fail", detail="```\n<script>alert(2)</script>\n" + ESCAPES[0])
    proc = commstack("report", str(run))
    assert proc.returncode == 1, proc.stderr
    assert not raw_controls(proc.stdout + proc.stderr)
    assert "\\x1b]0;PWNED\\x07\\x1b[31m\\x1b[2K\\u202e<script>" in proc.stdout
    md = (run / "report" / "report.md").read_text()
    assert not raw_controls(md)
    html = markdown.markdown(md, extensions=["tables", "fenced_code"])
    assert "<script" not in html and re.findall("<a [^>]*>", html) == ['<a href="rows.csv">']
    assert "[x](javascript:alert(1))" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert html.split("</table>")[0].count("<td>") == 6  # the pipe in the reason does not add a cell
    page = (run / "report" / "index.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_escape_sequences_in_an_input_file_never_reach_the_terminal_raw(tmp_path):
    """issue 22 item 5: a step id with ESC ] 0 ; ... BEL retitled the terminal. It is refused, and the
    error that quotes it shows the escapes, not the bytes."""
    suite = tmp_path / "esc.yaml"
    suite.write_text("name: esc\ndescription: '<script>alert(1)</script>'\nsteps:\n"
                     f"- {{id: {json.dumps('t' + ''.join(ESCAPES))}, benchmark: mpi-pingpong, mode: cpu, "
                     "ranks_per_node: 2, sizes: [8, 64]}\n")
    proc = commstack("suite", str(suite), "--dry-run")
    assert proc.returncode == 2 and not raw_controls(proc.stdout + proc.stderr)
    assert "steps.0.id: Value error, a name is" in proc.stderr and "\\x1b]0;PWNED\\x07" in proc.stderr
    (tmp_path / "esc\x1b]0;PWNED\x07.yaml").write_text("name: x\n")
    proc = commstack("suite", str(tmp_path / "esc\x1b]0;PWNED\x07.yaml"), "--dry-run")
    assert proc.returncode == 2 and not raw_controls(proc.stderr) and "esc\\x1b]0;PWNED\\x07.yaml" in proc.stderr


def test_parse_quotes_an_output_line_with_its_escapes_shown(tmp_path):
    """issue 22 item 5: `parse` quoted the offending line of a benchmark's output raw on the terminal."""
    out = tmp_path / "stdout.txt"
    out.write_text("# OSU MPI Latency Test v7.2\n" + "".join(ESCAPES) + " junk\n")
    proc = commstack("parse", "--strict", str(out))  # a step's rule: the line is the table's error
    assert proc.returncode == exits.UNKNOWN_FORMAT and not raw_controls(proc.stderr)
    assert "  line 2: \\x1b]0;PWNED\\x07\\x1b[31m\\x1b[2K\\u202e junk" in proc.stderr
    proc = commstack("parse", str(out))  # a job log's: the line after the header is its note (issue 35)
    assert proc.returncode == exits.TRUNCATED and not raw_controls(proc.stdout + proc.stderr)
    assert "note line 2: unknown (a line of the job log after the last table): \\x1b]0;PWNED" in proc.stdout


def test_parse_into_a_reader_that_goes_away_ends_cleanly(tmp_path):
    """`commstack parse FILE | head -1` on an output of 300 tables (JSON past a pipe's buffer): no
    BrokenPipe traceback, the status a shell gives a program SIGPIPE ended (141)."""
    table = (TOP / "tests" / "data" / "corpus" / "osu7" / "osu_latency-7.5.1.out").read_text()
    big = tmp_path / "stdout.txt"
    big.write_text(table * 300)
    proc = subprocess.run(["bash", "-c", 'set -o pipefail; "$@" | head -1', "bash", str(TOP / "bin" / "commstack"),
                           "parse", "--json", str(big)], capture_output=True, text=True, timeout=120)
    assert proc.stdout == "[\n" and proc.returncode == 141, proc.stdout[-500:] + proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


# ------------------------------------------------------------------------------- 10: damaged files

@pytest.fixture
def no_tables(tmp_path) -> Path:
    """An SQLite file of the history's schema version, without its tables."""
    path = tmp_path / "no-tables.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    return path


def damaged_history(tmp_path: Path) -> Path:
    """A real history with its pages past the header overwritten."""
    path = tmp_path / "damaged.sqlite"
    assert commstack("history", "import", str(a_run(tmp_path, "r0")), "--history", str(path)).returncode == 0
    data = bytearray(path.read_bytes())
    data[200:] = b"\xff" * (len(data) - 200)
    path.write_bytes(data)
    return path


def test_a_history_without_tables_or_damaged_is_a_named_error_not_a_regression(tmp_path, no_tables):
    """issue 22 item 10: `history` and `compare --baseline history` on an SQLite file without the tables
    gave a traceback and exit 1, which for compare means "regression". Now exit 2, naming the file."""
    run = a_run(tmp_path)
    for path, what in ((no_tables, "table runs is missing; not a commstack history, or damaged"),
                       (damaged_history(tmp_path), "not a commstack history, or damaged")):
        for argv in (["history", "--history", str(path)], ["compare", "--baseline", "history", str(run),
                                                           "--history", str(path)],
                     ["history", "import", str(run), "--history", str(path)]):
            proc = commstack(*argv)
            assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
            assert f"{path}: {what}" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("damage, key", [
    (lambda r: r["repeats"][0][0].pop("size"), "repeats.0.0.size: no size"),
    (lambda r: r["repeats"][0][1].update(bandwidth_MBps="abc"), "repeats.0.1.bandwidth_MBps: 'abc'"),
    (lambda r: r["repeats"][0][3].pop("bandwidth_MBps"), "repeats.0.3.bandwidth_MBps: no bandwidth_MBps"),
    (lambda r: r["repeats"][0][2].update(size="8"), "repeats.0.2.size: '8'"),
    (lambda r: r["repeats"][0][2].update(size=2 ** 63), "repeats.0.2.size: 9223372036854775808"),
    (lambda r: r.update(metric="furlongs"), "metric: unknown metric 'furlongs'"),
    (lambda r: r.update(unit="GB/s"), "unit: 'GB/s', but bandwidth_MBps is in MB/s"),
], ids=["no-size", "abc", "no-figure", "size-text", "size-2^63", "unknown-metric", "wrong-unit"])
def test_a_record_that_is_json_but_wrong_inside_is_a_named_error(tmp_path, damage, key):
    """issue 22 item 10: a record.json with a row without `size`, a value "abc" or an unknown metric crashed
    compare, report, export and history import with KeyError/ValueError. Each names the file and the key,
    exit 2."""
    good, bad = a_run(tmp_path, "good"), a_run(tmp_path, "bad")
    data = json.loads(record_json(bad).read_text())
    damage(data)
    record_json(bad).write_text(json.dumps(data))
    for argv in (["compare", str(good), str(bad)], ["report", str(bad)],
                 ["export", str(bad), "--format", "jsonl", "--output", str(tmp_path / "x.jsonl")],
                 ["history", "import", str(bad), "--history", str(tmp_path / "h.sqlite")]):
        proc = commstack(*argv)
        assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
        assert f"{record_json(bad)}: not a commstack record ({key}" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_run_names_a_damaged_history_after_its_verdicts(tmp_path):
    """issue 22 item 10: a damaged COMMSTACK_HISTORY failed the run after its steps passed, with a
    traceback, exit 1, and no junit or timings. Now the verdicts come first, every file of the run is
    written, and the history is named last, exit 2."""
    history = damaged_history(tmp_path)
    results = tmp_path / "r"
    proc = commstack("suite", "smoke", "--launcher", "mpirun", "--no-build", "--results", str(results),
                     env={"COMMSTACK_HISTORY": str(history)}, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert re.search(r"^pass {9}mpi-pingpong-cpu-N1-n2-host-native  mpi-pingpong 1 MiB: ", proc.stdout, re.M)
    assert proc.stdout.rstrip().splitlines()[-1] == "exit 2: bad input, named below", proc.stdout
    assert proc.stderr.rstrip().splitlines()[-1].startswith(
        f"commstack suite: error: history not updated: {history}: not a commstack history, or damaged (")
    assert {"junit.xml", "timings.json", "report", "plan.json", "steps"} <= set(os.listdir(results))


# --------------------------------------------------------------------------------- 11: bounded reads

def test_parse_refuses_what_is_not_a_regular_file_or_too_large(tmp_path):
    """issue 22 item 11: `parse /dev/zero` ran out of memory and `parse FIFO` hung. Both are refused before a
    byte is read, exit 2; so is a file over the 64 MiB limit (sparse here: its size is refused, not read)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.truncate(64 * 2 ** 20 + 1)
    for path, what in (("/dev/zero", "is a character device, not a regular file"),
                       (fifo, "is a FIFO, not a regular file"),
                       (big, "67108865 bytes, more than the 67108864 bytes commstack reads from one input file")):
        proc = commstack("parse", str(path), timeout=60)
        assert proc.returncode == 2 and f"commstack parse: error: {path}: {what}" in proc.stderr, proc.stderr


def test_references_that_are_not_regular_files_are_refused(tmp_path):
    """issue 22 item 11: a system with `references: /dev/zero` ran out of memory, one with a FIFO hung.
    Both are refused naming the system file, its `references` and the file, exit 2."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for references, what in (("/dev/zero", "is a character device"), (fifo, "is a FIFO")):
        system = tmp_path / "sys.yaml"
        system.write_text((TOP / "systems" / "local.yaml").read_text() + f"references: {references}\n")
        proc = commstack("suite", "smoke", "--system", str(system), "--dry-run", timeout=60)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"{system}: references: {references}: {what}, not a regular file" in proc.stderr


@pytest.mark.parametrize("name", ["record", "plan"])
def test_a_record_or_plan_symlinked_to_dev_zero_is_refused(tmp_path, name):
    """issue 22 item 11: a record.json symlinked to /dev/zero ran out of memory. A record or plan is read
    only as a regular file, never through a symlink, exit 2 for report, compare, export and history."""
    good, run = a_run(tmp_path, "good"), a_run(tmp_path)
    path = record_json(run) if name == "record" else run / "plan.json"
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")
    for argv in (["report", str(run)], ["compare", str(good), str(run)],
                 ["export", str(run), "--format", "bmf"], ["history", "import", str(run), "--history",
                                                           str(tmp_path / "h.sqlite")]):
        proc = commstack(*argv, timeout=60)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert f"{path}: is a symlink; commstack reads this file only as a regular file, never through a link" \
            in proc.stderr


# ------------------------------------------------------------------------------------ 12: smaller items

@pytest.mark.parametrize("size", ["9223372036854775808", "8589934591G", "1099511627777", "1025G"])
def test_message_sizes_are_bounded_by_the_schema(tmp_path, size):
    """issue 22 item 12: sizes of 2^63 and `8589934591G` passed the schema and failed at run time with
    srun's last line as the reason. More than 2^40 B is refused by the schema, exit 2."""
    suite = tmp_path / "big.yaml"
    suite.write_text(f"name: big\nsteps:\n- {{benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, "
                     f"sizes: [8, {size}]}}\n")
    proc = commstack("suite", str(suite), "--dry-run")
    assert proc.returncode == 2 and "  steps.0.sizes.1: " in proc.stderr, proc.stdout + proc.stderr
    assert ("less than or equal to 1099511627776" in proc.stderr if size.isdigit()
            else f"size {size} is larger than 1099511627776 bytes (1 TiB)" in proc.stderr)


def test_a_200_mb_suite_is_refused_by_its_size_before_it_is_read(tmp_path):
    """issue 22 item 12: a 200 MB suite file was read whole (48 s, 600 MB). Refused by its size, exit 2; the
    file is sparse, so a read would show as the test taking seconds and memory, not as a wrong answer."""
    suite = tmp_path / "huge.yaml"
    with open(suite, "wb") as f:
        f.write(b"name: huge\nsteps: []\n")
        f.truncate(200 * 10 ** 6)
    proc = commstack("suite", str(suite), "--dry-run")
    assert proc.returncode == 2
    assert f"{suite}: 200000000 bytes, more than the 16777216 bytes commstack reads from one input file" \
        in proc.stderr


def test_an_unwritable_results_directory_is_one_named_error(tmp_path):
    """issue 22 item 12: --results on an unwritable directory gave a FileWriteError traceback per step. It is
    one named error before anything runs, exit 5 (results could not be written, as the README says)."""
    ro = mount_tmpfs(tmp_path / "ro", "ro,size=1m,mode=0755")
    try:
        for results in (ro, ro / "run"):
            proc = commstack("suite", "smoke", "--launcher", "mpirun", "--no-build", "--results", str(results))
            assert proc.returncode == 5, proc.stdout + proc.stderr
            assert proc.stderr == f"commstack suite: error: cannot write {results}: Read-only file system\n"
            assert "[step" not in proc.stdout
    finally:
        subprocess.run(["umount", str(ro)], check=True)


ONE_STEP = "name: one\nsteps:\n- {id: one, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 8]}\n"
ONE = "one--one-cpu-N1-n2-host-native"


@pytest.mark.parametrize("planted", ["probe", "repeat-0"])
def test_a_symlink_planted_for_a_steps_raw_output_is_not_written_through(tmp_path, planted):
    """issue 22 item 3: the raw-output directories (steps/<step>/probe, repeat-N) were made with
    mkdir(parents=True), through a symlink planted there once the run began. They are made with O_NOFOLLOW
    from the run directory: the link is named in the step's record, not-run, and its target stays empty."""
    if not shutil.which("mpirun"):
        pytest.skip("no mpirun here (Debian: openmpi-bin)")
    from commstack.config import load_suite, load_system
    from commstack.run.binaries import Binaries
    from commstack.run.runner import Run
    from commstack.run.steps import expand
    system = load_system("local")
    suite = tmp_path / "one.yaml"
    suite.write_text(ONE_STEP)
    (step,) = expand(load_suite(str(suite)), system)
    results = tmp_path / "r"
    target = tmp_path / "target"
    target.mkdir()
    (results / "steps" / ONE).mkdir(parents=True)
    (results / "steps" / ONE / planted).symlink_to(target)
    run = Run(system, results, Binaries(pingpong=shutil.which("true"), build=False), launcher="mpirun")
    run.planned = [step]
    try:
        record = run.execute(step)
    finally:
        run.close()
    assert record.verdict == "not-run" and record.error_kind == "unsafe-path", record
    assert record.reason == (f"{results / 'steps' / ONE / planted} is a symlink or not a directory; commstack writes "
                             "results only into directories it made")
    assert Record.read(results / "steps" / ONE / "record.json").reason == record.reason
    assert os.listdir(target) == []


def test_the_facts_probe_gets_ld_library_path_but_no_code_to_load(tmp_path):
    """issue 22 item 12: with the loader variables kept from the probe, its `ldd` of the benchmark lost the
    system's LD_LIBRARY_PATH and found no MPI. The probe gets LD_LIBRARY_PATH (and finds the MPI there), never
    LD_PRELOAD; variables.json records both."""
    if not (shutil.which("cc") and shutil.which("mpirun")):
        pytest.skip("needs cc and mpirun (Debian: gcc, openmpi-bin)")
    lib = tmp_path / "lib"
    lib.mkdir()
    (tmp_path / "mpi.c").write_text('#include <stdio.h>\n__attribute__((constructor)) static void hello(void) '
                                    '{ fprintf(stderr, "PRELOADED\\n"); }\nint fake_mpi(void) { return 0; }\n')
    (tmp_path / "main.c").write_text("int fake_mpi(void);\nint main(void) { return fake_mpi(); }\n")
    mpi = lib / "libmpi.so.77"
    for argv in (["cc", "-shared", "-fPIC", "-Wl,-soname,libmpi.so.77", "-o", str(mpi), str(tmp_path / "mpi.c")],
                 ["cc", "-o", str(tmp_path / "bench"), str(tmp_path / "main.c"), str(mpi)]):
        built = subprocess.run(argv, capture_output=True, text=True)
        assert built.returncode == 0, built.stderr
    system = tmp_path / "ld.yaml"
    system.write_text((TOP / "systems" / "local.yaml").read_text().replace("name: local", "name: local-ld")
                      + f"variables:\n  LD_LIBRARY_PATH: {lib}\n  LD_PRELOAD: {mpi}\n")
    suite = tmp_path / "one.yaml"
    suite.write_text(ONE_STEP)
    results = tmp_path / "r"
    proc = commstack("suite", str(suite), "--system", str(system), "--launcher", "mpirun", "--no-build",
                     "--pingpong", str(tmp_path / "bench"), "--results", str(results), timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the stand-in prints no table: the step fails
    probe = results / "steps" / ONE / "probe"
    assert f" env LD_LIBRARY_PATH={lib} bash -c " in (probe / "command.txt").read_text()
    assert "LD_PRELOAD" not in (probe / "command.txt").read_text()
    assert f" libmpi {mpi}\n" in (probe / "stdout.txt").read_text()
    assert "PRELOADED" not in (probe / "stderr.txt").read_text()
    for outdir in (probe, results / "steps" / ONE / "repeat-0"):
        recorded = json.loads((outdir / "variables.json").read_text())
        assert (recorded["LD_LIBRARY_PATH"], recorded["LD_PRELOAD"]) == (str(lib), str(mpi))
    assert (results / "steps" / ONE / "repeat-0" / "stderr.txt").read_text().count("PRELOADED") >= 2


def test_a_new_run_directory_is_not_world_readable(tmp_path):
    """issue 22 items 3 and 12: plain `pytest suites/X.yaml` (no --results) made results/ and results/<run>
    with the umask's 0755. new_run_dir, the one place that makes them, gives results/ and the run 0750
    (less the umask), as bin/commstack does."""
    from commstack.run.runner import new_run_dir
    umask = os.umask(0o022)
    try:
        root = tmp_path / "results"
        run = new_run_dir(root)
        root.chmod(0o755)
        second = new_run_dir(root, latest=False)
    finally:
        os.umask(umask)
    assert [stat.S_IMODE(p.stat().st_mode) for p in (root, run, second)] == [0o750] * 3
    assert (root / "latest").resolve() == run
