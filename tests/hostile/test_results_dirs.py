"""Issue 32, items 1-4 and 11 (the commands that read a results directory): a results directory prepared by
someone else, or by an unlucky copy, through the command a user types (`bin/commstack report`, `status`,
`export`, `history`, `parse`, `suite --results`). The swap and the symlinked parents are made by a second,
unprivileged user (created here with useradd, root only). Each test names the defect it guards."""

import errno
import json
import os
import pwd
import shutil
import sqlite3
import stat
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest

from commstack.files import own_dir
from commstack.paths import TOP
from commstack.results.records import Plan, Record
from test_hostile_inputs_without_slurm import ESCAPES, a_run, commstack, mount_tmpfs, raw_controls, record_json

pytestmark = pytest.mark.hostile

OTHER = "cs-hostile"
#: markup a report must show as text, with control and format characters in it
MARKUP = "<img src=x onerror=alert(1)><script>alert(2)</script><svg/onload=alert(3)> & [l](javascript:x) $\\q$ |"
HOSTILE = MARKUP + "".join(ESCAPES)


@pytest.fixture(scope="module")
def other_user():
    """An unprivileged user (uid, gid), created with useradd when missing and removed again if created here."""
    if os.geteuid() != 0:
        pytest.skip("a second user and files handed to it need root")
    try:
        pwd.getpwnam(OTHER)
        made = False
    except KeyError:
        proc = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot create a second user: {proc.stderr.strip()}")
        made = True
    user = pwd.getpwnam(OTHER)
    yield user.pw_uid, user.pw_gid
    if made:
        subprocess.run(["userdel", OTHER], check=True)


@pytest.fixture
def other_home(shared, other_user) -> Path:
    """A home directory of the other user's, as /home/other is."""
    home = shared / "home" / "other"
    home.mkdir(parents=True)
    os.chown(home, *other_user)
    return home


@pytest.fixture
def shared(other_user):
    """A fresh directory the other user can reach (pytest's own tmp_path is root's, 0700)."""
    d = Path(tempfile.mkdtemp(prefix="commstack-hostile-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d)  # never follows a symlink in it


def as_other(other_user, *argv: str, **kw) -> subprocess.Popen:
    uid, gid = other_user
    python = shutil.which("python3", path="/usr/bin:/bin")
    return subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", python, *argv], **kw)


def everything_under(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


# ------------------------------------------------------------------------------- 1: a planted report

def test_a_planted_report_symlink_is_replaced_and_its_target_survives(tmp_path):
    """issue 32 item 1: `report -> /some/dir` in a results directory: `report` exited 0 and /some/dir was gone
    (shutil.rmtree of the resolved old report). The symlink is replaced, never followed; the swap `run` uses
    stays: a second report replaces the first, and the first one's directory is removed."""
    run = a_run(tmp_path)
    precious = tmp_path / "precious"
    (precious / "sub").mkdir(parents=True)
    (precious / "sub" / "file").write_text("precious\n")
    (run / "report").symlink_to(precious)
    proc = commstack("report", str(run))
    assert proc.returncode == 0, proc.stderr
    assert (precious / "sub" / "file").read_text() == "precious\n"
    first = os.readlink(run / "report")
    assert first.startswith(".report-") and (run / first / "index.html").is_file()
    assert commstack("report", str(run)).returncode == 0
    second = os.readlink(run / "report")
    assert second != first and (run / second / "index.html").is_file() and not (run / first).exists()
    assert sorted(p.name for p in run.iterdir() if p.name.startswith(".report")) == [second]
    assert (precious / "sub" / "file").read_text() == "precious\n"


# ------------------------------------------------------------------- 2: a swap by another user

SWAP = """import os, sys
run, target, ready = sys.argv[1:]
open(ready, "w").close()
while True:  # every directory the report is rendered into, renamed away and replaced by a symlink
    for name in os.listdir(run):
        if name.startswith(".report-") and not os.path.islink(os.path.join(run, name)):
            try:
                os.rename(os.path.join(run, name), os.path.join(run, ".moved" + name))
                os.symlink(target, os.path.join(run, name))
            except OSError:
                pass
"""


def test_a_swap_during_report_by_another_user_writes_nothing_outside(shared, other_user):
    """issue 32 item 2: a loop run by another user renamed `.report-XXXX` away and put a symlink in its place:
    root wrote index.html, report.md and a PNG into the target, on the first try. A results directory that
    is not ours (or under a parent of someone else's) is refused before anything is written, every time."""
    uid, gid = other_user
    theirs = a_run(shared, "theirs")
    for p in [theirs, *theirs.rglob("*")]:
        os.chown(p, uid, gid)
    below = shared / "parent"
    below.mkdir()
    ours = a_run(below, "ours")
    os.chown(below, uid, gid)
    target = shared / "target"
    target.mkdir(mode=0o777)
    target.chmod(0o777)
    (shared / "swap.py").write_text(SWAP)
    flags = shared / "flags"
    flags.mkdir()
    os.chown(flags, uid, gid)
    ready = flags / "ready"
    loop = as_other(other_user, str(shared / "swap.py"), str(theirs), str(target), str(ready))
    try:
        while not ready.exists():  # the loop runs before the first report
            assert loop.poll() is None, "the swap loop ended"
        for _ in range(5):
            for run, owner in ((theirs, f"results directory {theirs} belongs to uid {uid}, not to you (uid 0)"),
                               (ours, f"{ours}: its parent {below} belongs to uid {uid}")):
                proc = commstack("report", str(run))
                assert os.listdir(target) == [], proc.stdout  # main: index.html, report.md, osu_bw-host.png
                assert proc.returncode == 2, proc.stdout + proc.stderr
                assert owner in proc.stderr and "Traceback" not in proc.stderr
    finally:
        loop.kill()
        loop.wait()
    assert os.listdir(target) == [] and not (theirs / "report").exists() and not (ours / "report").exists()


# --------------------------------------------------------------------------- 3: markup in every field

class Elements(HTMLParser):
    """Every element and attribute a real HTML parser finds in a page."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


#: what the report's template and code make: nothing else may appear
TEMPLATE_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "code", "b", "a", "table", "tr",
                 "th", "td", "ul", "li", "pre", "img"}
TEMPLATE_ATTRS = {"lang", "charset", "href", "class", "alt", "src"}
#: what report.md's own Markdown renders to
MARKDOWN_TAGS = {"h1", "h2", "p", "strong", "a", "code", "table", "thead", "tbody", "tr", "th", "td", "pre", "img"}


def hostile_record(run: Path) -> None:
    """A failed step whose every free string field holds markup and control characters (run_id, a one-line
    field, markup only), and tags.memory with a '/'."""
    seed = json.loads(record_json(a_run(run.parent, "seed")).read_text())
    rows = seed["repeats"][0]
    Record(run_id=MARKUP, index=0, suite="s", system="alps-gh200", step="osu_bw", benchmark=HOSTILE, tool=HOSTILE,
           tags={"nodes": 2, "memory": "../" + HOSTILE + "/x", "environment": HOSTILE, HOSTILE: HOSTILE},
           metric="bandwidth_MBps", unit="MB/s", verdict="fail", reason=HOSTILE, error_kind=HOSTILE,
           validated="no", notes=[HOSTILE, HOSTILE], detail=HOSTILE + "\n```\n" + HOSTILE, title=HOSTILE,
           version=HOSTILE, commands=[[HOSTILE, HOSTILE]], nodelist=[HOSTILE], repeats=[rows, rows],
           outputs=[HOSTILE], stack={HOSTILE: HOSTILE}, started=1000.0).write(run)


def test_markup_and_controls_in_every_record_field_are_text_in_the_report(tmp_path):
    """issue 32 item 3: error_kind reached <td> unescaped, tags.memory <h2>, alt= and the PNG's file name
    (`<img src=x onerror=...>` verbatim in index.html and report.md; a memory with '/' a FileNotFoundError).
    Every field is text now: the page parsed by html.parser has only the template's elements, the Markdown
    rendered has no element from the record, controls are shown as escapes, the PNG is a file of its own."""
    run = tmp_path / "run"
    hostile_record(run)
    proc = commstack("report", str(run))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # fail: the step's verdict
    assert "Traceback" not in proc.stderr and not raw_controls(proc.stdout + proc.stderr)
    report = run / "report"
    pngs = [p.name for p in report.iterdir() if p.suffix == ".png"]
    assert sorted(p.name for p in report.iterdir()) == sorted(["index.html", "report.md", "rows.csv", *pngs])
    assert len(pngs) == 1 and not {"/", "<", ">", "$", "\x1b"} & set(pngs[0])
    page = (report / "index.html").read_text()
    assert not raw_controls(page)
    parser = Elements()
    parser.feed(page)
    assert {tag for tag, _ in parser.tags} <= TEMPLATE_TAGS
    assert {name for _, attrs in parser.tags for name in attrs} <= TEMPLATE_ATTRS
    assert [a["href"] for tag, a in parser.tags if tag == "a"] == ["rows.csv", "report.md"]
    images = [a for tag, a in parser.tags if tag == "img"]
    assert len(images) == 1 and images[0]["src"].startswith("data:image/png;base64,")
    assert "<img src=x onerror=alert(1)>" in images[0]["alt"]  # the text, as the parser reads the attribute
    shown = "&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)&lt;/script&gt;"
    assert page.count(shown) >= 8  # reason, error kind, nodes, command, notes, detail, heading, alt
    assert "\\x1b]0;PWNED\\x07\\x1b[31m\\x1b[2K\\u202e" in page
    md = (report / "report.md").read_text()
    assert not raw_controls(md)
    rendered = Elements()
    rendered.feed(markdown.markdown(md, extensions=["tables", "fenced_code"]))
    assert {tag for tag, _ in rendered.tags} <= MARKDOWN_TAGS
    assert [a.get("href") for tag, a in rendered.tags if tag == "a"] == ["rows.csv"]
    assert [a["src"] for tag, a in rendered.tags if tag == "img"] == pngs
    assert not any(name.startswith("on") for _, attrs in rendered.tags for name in attrs)


def test_markup_and_controls_in_every_record_field_reach_no_terminal_raw(tmp_path):
    """issue 32 item 3 (terminal): `export --format perflog --output -` printed a record's benchmark and node
    names with their escape sequences raw. Every command that prints a record's fields shows them escaped."""
    run = tmp_path / "run"
    hostile_record(run)
    db = tmp_path / "h.sqlite"
    exports = (["export", str(run), "--format", fmt, "--output", "-"] for fmt in ("perflog", "jsonl", "bmf", "elastic"))
    for argv in (*exports, ["compare", str(run), str(run)], ["history", "import", str(run), "--history", str(db)],
                 ["history", "--history", str(db)]):
        proc = commstack(*argv)
        assert proc.returncode in (0, 1), (argv, proc.stderr)
        assert not raw_controls(proc.stdout + proc.stderr), argv
        assert "Traceback" not in proc.stderr
    perflog = commstack("export", str(run), "--format", "perflog", "--output", "-").stdout
    assert "\\x1b]0;PWNED\\x07" in perflog


@pytest.mark.parametrize("field", ["suite", "system", "step", "metric", "unit", "verdict", "validated"])
def test_markup_in_a_record_field_with_a_schema_is_refused_by_name(tmp_path, field):
    """The fields whose schema is a name or a choice take no markup: the record is refused, exit 2."""
    run = a_run(tmp_path)
    data = json.loads(record_json(run).read_text())
    data[field] = MARKUP
    record_json(run).write_text(json.dumps(data))
    proc = commstack("report", str(run))
    assert proc.returncode == 2 and f"{record_json(run)}: not a commstack record (" in proc.stderr
    assert field in proc.stderr and "); truncated, damaged or written by something else" in proc.stderr


def test_a_step_name_with_mathtext_in_the_history_is_plotted_as_text(tmp_path):
    """issue 32 item 3 (history): a history file's step holding `$\\q$` reached matplotlib's mathtext parser,
    a ValueError traceback for `history --plot`. Drawn as text now."""
    db = tmp_path / "h.sqlite"
    assert commstack("history", "import", str(a_run(tmp_path)), "--history", str(db)).returncode == 0
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA foreign_keys = OFF")
        for table in ("records", "figures"):
            con.execute(f"UPDATE {table} SET step = ?", (MARKUP,))
    proc = commstack("history", "--history", str(db), "--plot", str(tmp_path / "trend.png"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "trend.png").read_bytes().startswith(b"\x89PNG\r\n")


# ------------------------------------------------------------ 4: symlinked parents, nothing made outside

def test_a_symlinked_parent_of_results_makes_nothing_outside(shared, other_user, other_home):
    """issue 32 item 4: `--results /home/other/res/x/run1` with `res -> /etc` (the other user's symlink) was
    refused, but /etc/x existed afterwards, made by root. The path is checked from / down before any part is
    made: refused, and nothing made in the target."""
    uid, gid = other_user
    home = other_home
    etc = shared / "etc"
    etc.mkdir()
    (home / "res").symlink_to(etc)
    os.lchown(home / "res", uid, gid)
    results = home / "res" / "x" / "run1"
    proc = commstack("suite", "smoke", "--launcher", "mpirun", "--no-build", "--results", str(results))
    assert os.listdir(etc) == [] and os.listdir(home) == ["res"]  # main: etc/x, made by root
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{results}: its parent {home} belongs to uid {uid}" in proc.stderr
    os.chown(home, 0, 0)  # the home is root's now: the other user's symlink itself is refused
    proc = commstack("suite", "smoke", "--launcher", "mpirun", "--no-build", "--results", str(results))
    assert proc.returncode == 2 and f"{results}: its parent {home / 'res'} belongs to uid {uid}" in proc.stderr
    assert os.listdir(etc) == []


def test_a_state_directory_under_another_users_home_makes_nothing(shared, other_user, other_home):
    """issue 32 item 4: the state directory under `sudo -E` (HOME of another user): mkdir(parents=True) made
    ~/.local/state/commstack as root before the check, through a `.local` symlink of that user's. Nothing
    is made now, neither in the home nor in the symlink's target."""
    uid, gid = other_user
    home = other_home
    elsewhere = shared / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "COMMSTACK_SLURM_DIR")}
    for planted in (False, True):
        if planted:
            (home / ".local").symlink_to(elsewhere)
            os.lchown(home / ".local", uid, gid)
        proc = subprocess.run([str(TOP / "bin" / "commstack"), "suite", "smoke", "--no-build"], capture_output=True,
                              text=True, timeout=120, env={**env, "HOME": str(home)})
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"its parent {home} belongs to uid {uid}" in proc.stderr and "[step" not in proc.stdout
        assert everything_under(home) == ([".local"] if planted else []) and os.listdir(elsewhere) == []


# ---------------------------------------------------------------------- 11: named errors, not tracebacks

def test_a_directory_where_an_input_file_belongs_is_a_named_error(tmp_path):
    """issue 32 item 11: `parse DIR` was an IsADirectoryError traceback, exit 1 (files.open_bounded opened the
    directory before it looked at it). `parse DIR` now reads a directory of job logs; a directory where a
    record belongs is the same error through `report`: named, exit 2."""
    run = a_run(tmp_path)
    record_json(run).unlink()
    record_json(run).mkdir()
    proc = commstack("report", str(run))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{record_json(run)}: is a directory, not a regular file" in proc.stderr


def test_standard_output_on_a_full_device_is_a_named_error(tmp_path):
    """issue 32 item 11: `export --output -`, `parse` and `history --plot -` into /dev/full were OSError
    tracebacks, exit 1. Exit 5 (results could not be written, as `run` says it), one line."""
    run = a_run(tmp_path)
    db = tmp_path / "h.sqlite"
    assert commstack("history", "import", str(run), "--history", str(db)).returncode == 0
    for argv in (["export", str(run), "--format", "jsonl", "--output", "-"],
                 ["parse", str(TOP / "systems" / "references" / "seeds" / "cscs-osu-01.txt")],
                 ["history", "--history", str(db), "--plot", "-"]):
        with open("/dev/full", "wb") as full:
            proc = subprocess.run([str(TOP / "bin" / "commstack"), *argv], stdout=full, stderr=subprocess.PIPE,
                                  text=True, timeout=120)
        assert proc.returncode == 5, (argv, proc.stderr)
        assert proc.stderr.endswith(f"commstack {argv[0]}: error: cannot write standard output: No space left on "
                                    "device\n"), (argv, proc.stderr)
        assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


@pytest.fixture
def full_fs(tmp_path):
    """A 64 KiB tmpfs, root's and 0755, filled up by the test (root only)."""
    d = mount_tmpfs(tmp_path / "small", "size=64k,mode=0755")
    yield d
    subprocess.run(["umount", str(d)], check=True)


def fill(d: Path) -> None:
    try:
        with open(d / "filler", "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
    except OSError as e:
        assert e.errno == errno.ENOSPC


def test_report_and_history_import_on_a_full_file_system_say_so(tmp_path, full_fs):
    """issue 32 item 11: `report` on a full file system was a traceback, exit 1; `history import` said the
    history was damaged. Both exit 5 naming the full file system; no half-made report is left."""
    run = full_fs / "run"
    shutil.copytree(a_run(tmp_path), run)
    run.chmod(0o750)
    fill(full_fs)
    proc = commstack("report", str(run))
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"commstack report: error: cannot write {run}/.report-") and \
        proc.stderr.endswith(": No space left on device\n"), proc.stderr
    assert sorted(os.listdir(run)) == ["steps"]
    history = full_fs / "h.sqlite"
    proc = commstack("history", "import", str(a_run(tmp_path, "r2")), "--history", str(history))
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert proc.stderr == (f"commstack history: error: {history}: the file system is full (database or disk is "
                           "full); the history is as it was\n")


def test_infinity_in_a_record_is_not_drawn(tmp_path):
    """issue 32 item 11: `Infinity` in a record (JSON of no commstack's: it writes null) gave matplotlib's
    ValueError traceback. It is read as not finite, like null: not drawn, and a step with nothing finite
    gets no plot."""
    run = a_run(tmp_path)
    data = json.loads(record_json(run).read_text())
    for row in data["repeats"][0]:
        row["bandwidth_MBps"] = float("inf")
    record_json(run).write_text(json.dumps(data))
    assert "Infinity" in record_json(run).read_text()
    proc = commstack("report", str(run))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "No plot: no step has a finite figure above zero" in (run / "report" / "index.html").read_text()


def test_status_with_a_damaged_exit_file_names_it(tmp_path):
    """issue 32 item 11: a batch step's `exit` file that is not '<status> <started> <ended>' was a ValueError
    traceback in `status`. That step fails naming the file; the others are judged, the report written.
    Slurm here is a site Slurm whose sinfo and squeue are stubs saying the job completed."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "sinfo").write_text("#!/bin/sh\nexit 0\n")
    (stubs / "squeue").write_text("#!/bin/sh\necho COMPLETED\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    (tmp_path / "site.yaml").write_text("name: site\nnodes: 1\nnode: {cores: 2, gpus: 0, nics: 1}\n"
                                        "launcher: {mpi: pmix}\n")
    (tmp_path / "one.yaml").write_text("name: one\nsteps:\n- {id: one, benchmark: mpi-pingpong, mode: cpu, "
                                       "ranks_per_node: 2, sizes: [8, 8]}\n")
    run = own_dir(tmp_path / "run")
    step = "one--one-cpu-N1-n2-host-native"
    Plan(system=str(tmp_path / "site.yaml"), suite=str(tmp_path / "one.yaml"), job_id="7",
         commands={step: [["probe"], ["srun", "mpi-pingpong"]]}).write(run)
    repeat = run / "steps" / step / "repeat-0"
    repeat.mkdir(parents=True)
    for name, text in (("exit", "0 1700000000.5\n"), ("stdout.txt", ""), ("stderr.txt", "")):
        (repeat / name).write_text(text)
    proc = commstack("status", str(run), env={"PATH": f"{stubs}:{os.environ['PATH']}",
                                              "COMMSTACK_HISTORY": str(tmp_path / "h.sqlite")})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "job 7: COMPLETED" in proc.stdout
    assert (f"fail         one/one-cpu-N1-n2-host-native: {repeat / 'exit'}: '0 1700000000.5' is not the job's "
            "'<status> <started> <ended>': damaged") in proc.stdout
    assert (run / "report" / "index.html").is_file()
    assert stat.S_ISLNK(os.lstat(run / "report").st_mode)
